"""`tt.scipy.stats`: SciPy's distributions with their method names and arguments, differentiable
in the value and in the parameters (as `jax.scipy.stats`).

    tt.scipy.stats.norm.logpdf(x, loc=0, scale=1)        SciPy's broadcasting; Tensors or arrays
    tt.scipy.stats.norm(loc, scale).logpdf(x)            frozen, as SciPy
    tt.scipy.stats.multivariate_normal.logpdf(x, mean, cov)

Every method is composed from recorded operations (tt.scipy.special's rows, log, where, ...), so
reverse and forward mode both work, to any order the pieces allow. Outside the support the
values are SciPy's (-inf for logpdf, 0 for pdf and cdf), with a zero gradient there; at the closed
edges of a support (gamma and chi2 at 0, beta at 0 and 1) they are SciPy's too (log 2 for
beta.logpdf(0, 1, 2), +inf where the density diverges), with the one-sided slope as the gradient;
parameters outside their range (scale <= 0, a <= 0, p outside [0, 1], ...) give NaN, as SciPy's
argument check; t with df = inf is the normal. scipy/specs.py's STATS_EDGES holds these rows. Limits:
a cdf written with betainc or gammainc is differentiable in the value, loc and scale (and in mu,
p of poisson, binom) but not in the shape parameters that enter betainc/gammainc as a or b
(t.cdf in df, gamma.cdf in a, beta.cdf in a and b, chi2.cdf in df, binom.cdf in n): those raise
if they require grad. Methods not written here (rvs, mean, var, ...) are SciPy's, on values.
"""

import math

import numpy as np
import scipy.stats

from .. import linalg as tt_linalg
from .. import ops
from ..ops import elementwise as ew
from ..ops_science import _arg
from ..state import traced_data
from ..tensor import Tensor
from . import special as sp

LOG_2PI = math.log(2 * math.pi)


def _value(x):
    """x's value as a NumPy array (no gradient; while tt.compile records, a traced one, whose
    NumPy operations are lines of the program)."""
    if isinstance(x, Tensor):
        return traced_data(x)
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def _constant(method, what, value):
    if isinstance(value, Tensor) and value.requires_grad:
        raise TypeError(f"tt.scipy.stats.{method}: not differentiable in {what} (it enters "
                        f"betainc/gammainc as a shape parameter); pass {what}.detach() for its value")
    return _arg(traced_data(value) if isinstance(value, Tensor) else value)


def _where(condition, x, fill):
    """x where condition holds, else fill. Always recorded (no shortcut when it holds
    everywhere): tt.compile then recomputes the mask on every call."""
    return ew.where(condition, x, fill)


def _inside(condition, x, safe):
    """x where condition holds, else `safe` (a point inside the domain), so that values and
    gradients computed from it stay finite where `_where` throws them away."""
    return ew.where(condition, x, safe)


def _standardized(x, loc, scale):
    return (_arg(x) - _arg(loc)) / _arg(scale)


def _log_scale(scale):
    return np.log(_inside(_arg(scale) > 0, _arg(scale), 1.0))


def _scale_ok(scale, value):
    """NaN where scale <= 0, as SciPy."""
    return _where(_arg(scale) > 0, value, np.nan)


def _valid(condition, value):
    """NaN where SciPy's argument check fails (a shape parameter outside its range)."""
    return _where(condition, value, np.nan)


def _power_at_zero(exponent):
    """xlogy(exponent, 0) (the density's z ** (a - 1) term at the closed edge z = 0): 0 where the
    exponent is 0, +inf below, -inf above, as SciPy's value there. A constant (no gradient)."""
    e = _value(exponent)
    return np.where(e == 0, 0.0, np.where(e < 0, np.inf, -np.inf))


class _Frozen:
    """dist(*params).method(x) is dist.method(x, *params), as SciPy's frozen distributions."""

    def __init__(self, dist, args, kwds):
        self.dist, self.args, self.kwds = dist, args, kwds

    def __getattr__(self, name):
        method = getattr(self.dist, name)
        return lambda *x, **kw: method(*x, *self.args, **{**self.kwds, **kw})

    def __repr__(self):
        return f"<frozen tt.scipy.stats.{self.dist.name}{self.args}{self.kwds}>"


class _Distribution:
    name = None

    def __call__(self, *args, **kwds):
        return _Frozen(self, args, kwds)

    def __getattr__(self, name):     # rvs, mean, var, ...: SciPy's, on values
        return getattr(getattr(scipy.stats, self.name), name)

    def __repr__(self):
        return f"<tt.scipy.stats.{self.name}>"


class _Continuous(_Distribution):
    def pdf(self, x, *args, **kwds):
        return np.exp(self.logpdf(x, *args, **kwds))

    def logcdf(self, x, *args, **kwds):
        with np.errstate(divide="ignore"):
            return np.log(self.cdf(x, *args, **kwds))

    def sf(self, x, *args, **kwds):
        return 1.0 - self.cdf(x, *args, **kwds)

    def logsf(self, x, *args, **kwds):
        with np.errstate(divide="ignore"):
            return np.log(self.sf(x, *args, **kwds))


class _Discrete(_Distribution):
    def pmf(self, k, *args, **kwds):
        return np.exp(self.logpmf(k, *args, **kwds))

    def logcdf(self, k, *args, **kwds):
        with np.errstate(divide="ignore"):
            return np.log(self.cdf(k, *args, **kwds))

    def sf(self, k, *args, **kwds):
        return 1.0 - self.cdf(k, *args, **kwds)

    def logsf(self, k, *args, **kwds):
        with np.errstate(divide="ignore"):
            return np.log(self.sf(k, *args, **kwds))


# ----- continuous ------------------------------------------------------------------------------------
class _Norm(_Continuous):
    """The normal distribution, as `scipy.stats.norm`:
    the same methods and arguments, differentiable in every Tensor argument.

    Examples
    --------
    >>> mu = tt.tensor(0.0, requires_grad=True)
    >>> lp = tt.scipy.stats.norm.logpdf(1.0, loc=mu, scale=1.0)
    >>> lp.backward()
    >>> mu.grad
    array(1.)
    """
    name = "norm"

    def logpdf(self, x, loc=0, scale=1):
        z = _standardized(x, loc, scale)
        return _scale_ok(scale, -0.5 * (z * z) - _log_scale(scale) - 0.5 * LOG_2PI)

    def cdf(self, x, loc=0, scale=1):
        return _scale_ok(scale, sp.ndtr(_standardized(x, loc, scale)))

    def logcdf(self, x, loc=0, scale=1):
        return _scale_ok(scale, sp.log_ndtr(_standardized(x, loc, scale)))

    def sf(self, x, loc=0, scale=1):
        return _scale_ok(scale, sp.ndtr(-_standardized(x, loc, scale)))

    def logsf(self, x, loc=0, scale=1):
        return _scale_ok(scale, sp.log_ndtr(-_standardized(x, loc, scale)))

    def ppf(self, q, loc=0, scale=1):
        return _arg(loc) + _arg(scale) * sp.ndtri(_arg(q))

    def isf(self, q, loc=0, scale=1):
        return _arg(loc) - _arg(scale) * sp.ndtri(_arg(q))


class _T(_Continuous):
    """The Student's t distribution, as `scipy.stats.t`:
    the same methods and arguments, differentiable in every Tensor argument but cdf's df (a
    shape parameter of betainc there: a df that requires grad raises).

    Examples
    --------
    >>> df = tt.tensor(3.0, requires_grad=True)
    >>> lp = tt.scipy.stats.t.logpdf(tt.tensor([0.0, 2.0]), df)
    >>> lp
    tensor([-1.00088885, -2.69548457], requires_grad=True)
    >>> lp.sum().backward()
    >>> df.grad
    array(0.01026448)
    >>> tt.scipy.stats.t(3.0).cdf(tt.tensor(2.0))        # frozen, as SciPy's
    tensor(0.93033702)
    """
    name = "t"

    def logpdf(self, x, df, loc=0, scale=1):
        z, df = _standardized(x, loc, scale), _arg(df)
        infinite, ok = np.isinf(_value(df)), _value(df) > 0    # df = inf: the normal, as SciPy
        df = _inside(ok & ~infinite, df, 1.0)
        student = (sp.gammaln(0.5 * (df + 1)) - sp.gammaln(0.5 * df) - 0.5 * np.log(df * math.pi)
                   - 0.5 * (df + 1) * np.log1p(z * z / df))
        value = ew.where(infinite, -0.5 * (z * z) - 0.5 * LOG_2PI, student) - _log_scale(scale)
        return _valid(ok, _scale_ok(scale, value))

    def cdf(self, x, df, loc=0, scale=1):
        z, df = _standardized(x, loc, scale), _constant("t.cdf", "df", df)
        infinite, ok = np.isinf(df), df > 0
        safe = np.where(ok & ~infinite, df, 1.0)
        tail = 0.5 * sp.betainc(0.5 * safe, 0.5, safe / (safe + z * z))   # P(T < -|z|)
        value = ew.where(infinite, sp.ndtr(z), ew.where(z < 0, tail, 1.0 - tail))
        return _valid(ok, _scale_ok(scale, value))


class _Gamma(_Continuous):
    """The gamma distribution, as `scipy.stats.gamma`:
    the same methods and arguments, differentiable in every Tensor argument but the shape a of
    cdf and sf (a shape parameter of gammainc there: an a that requires grad raises).

    Examples
    --------
    >>> a = tt.tensor(2.0, requires_grad=True)
    >>> scale = tt.tensor(1.5, requires_grad=True)
    >>> lp = tt.scipy.stats.gamma.logpdf(1.0, a, scale=scale)
    >>> lp
    tensor(-1.47759688, requires_grad=True)
    >>> lp.backward()
    >>> a.grad, scale.grad
    (array(-0.82824944), array(-0.88888889))
    >>> x = tt.tensor(1.0, requires_grad=True)
    >>> cdf = tt.scipy.stats.gamma.cdf(x, 2.0)
    >>> cdf.backward()
    >>> cdf, x.grad                                    # the cdf, and the density at 1
    (tensor(0.26424112, requires_grad=True), array(0.36787944))
    """
    name = "gamma"

    def logpdf(self, x, a, loc=0, scale=1):
        z, a = _standardized(x, loc, scale), _arg(a)
        ok = _value(a) > 0
        a = _inside(ok, a, 1.0)
        interior = z > 0                  # the support is closed at 0: SciPy's value there
        power = ew.where(interior, sp.xlogy(a - 1, _inside(interior, z, 1.0)), _power_at_zero(a - 1))
        value = power - _inside(z >= 0, z, 0.0) - sp.gammaln(a) - _log_scale(scale)
        return _valid(ok, _scale_ok(scale, _where(z >= 0, value, -np.inf)))

    def cdf(self, x, a, loc=0, scale=1):
        z, a = _standardized(x, loc, scale), _constant("gamma.cdf", "a", a)
        inside, ok = z > 0, a > 0
        value = _where(inside, sp.gammainc(np.where(ok, a, 1.0), _inside(inside, z, 1.0)), 0.0)
        return _valid(ok, _scale_ok(scale, value))

    def sf(self, x, a, loc=0, scale=1):
        z, a = _standardized(x, loc, scale), _constant("gamma.sf", "a", a)
        inside, ok = z > 0, a > 0
        value = _where(inside, sp.gammaincc(np.where(ok, a, 1.0), _inside(inside, z, 1.0)), 1.0)
        return _valid(ok, _scale_ok(scale, value))


class _Chi2(_Continuous):
    """The chi-squared distribution, as `scipy.stats.chi2`:
    the same methods and arguments, differentiable in every Tensor argument but the df of cdf
    and sf (a df that requires grad raises there).

    Examples
    --------
    >>> stat = tt.tensor(3.0, requires_grad=True)
    >>> p_value = tt.scipy.stats.chi2.sf(stat, 2)
    >>> p_value                                        # exp(-3/2)
    tensor(0.22313016, requires_grad=True)
    >>> p_value.backward()
    >>> stat.grad                                      # minus the density
    array(-0.11156508)
    >>> tt.scipy.stats.chi2.logpdf(tt.tensor([1.0, 3.0]), 2)
    tensor([-1.19314718, -2.19314718])
    """
    name = "chi2"

    def logpdf(self, x, df, loc=0, scale=1):
        return gamma.logpdf(x, 0.5 * _arg(df), loc, 2 * _arg(scale))

    def cdf(self, x, df, loc=0, scale=1):
        return gamma.cdf(x, 0.5 * _constant("chi2.cdf", "df", df), loc, 2 * _arg(scale))

    def sf(self, x, df, loc=0, scale=1):
        return gamma.sf(x, 0.5 * _constant("chi2.sf", "df", df), loc, 2 * _arg(scale))


class _Beta(_Continuous):
    """The beta distribution, as `scipy.stats.beta`:
    the same methods and arguments, differentiable in every Tensor argument but cdf's a and b
    (shape parameters of betainc there: an a or b that requires grad raises).

    Examples
    --------
    >>> a = tt.tensor(2.0, requires_grad=True)
    >>> lp = tt.scipy.stats.beta.logpdf(0.25, a, 3.0)
    >>> lp
    tensor(0.52324814, requires_grad=True)
    >>> lp.backward()
    >>> a.grad
    array(-0.30296103)
    >>> tt.scipy.stats.beta.cdf(tt.tensor([0.25, 0.5]), 2, 3)
    tensor([0.26171875, 0.6875    ])
    """
    name = "beta"

    def logpdf(self, x, a, b, loc=0, scale=1):
        z, a, b = _standardized(x, loc, scale), _arg(a), _arg(b)
        ok = (_value(a) > 0) & (_value(b) > 0)
        a, b = _inside(ok, a, 1.0), _inside(ok, b, 1.0)
        # the support is closed at 0 and 1: SciPy's values there
        left = ew.where(z > 0, sp.xlogy(a - 1, _inside((z > 0) & (z <= 1), z, 0.5)), _power_at_zero(a - 1))
        right = ew.where(z < 1, sp.xlog1py(b - 1, -_inside((z >= 0) & (z < 1), z, 0.5)),
                         _power_at_zero(b - 1))
        value = left + right - sp.betaln(a, b) - _log_scale(scale)
        return _valid(ok, _scale_ok(scale, _where((z >= 0) & (z <= 1), value, -np.inf)))

    def cdf(self, x, a, b, loc=0, scale=1):
        z = _standardized(x, loc, scale)
        a, b = _constant("beta.cdf", "a", a), _constant("beta.cdf", "b", b)
        ok = (a > 0) & (b > 0)
        inside = (z > 0) & (z < 1)
        value = sp.betainc(np.where(ok, a, 1.0), np.where(ok, b, 1.0), _inside(inside, z, 0.5))
        above = _where(z >= 1, 1.0, 0.0)      # (recorded: tt.compile recomputes it on every call)
        return _valid(ok, _scale_ok(scale, _where(inside, value, above)))


# ----- discrete ------------------------------------------------------------------------------------------
def _counts(k, loc):
    """k - loc as values (counts carry no gradient), and where they are whole numbers."""
    k = _value(k) - _value(loc)
    return k, k == np.floor(k)


def _probability(p):
    """Where p is a probability (SciPy's argument check for bernoulli and binom)."""
    p = _value(p)
    return (p >= 0) & (p <= 1)


class _Poisson(_Discrete):
    """The Poisson distribution, as `scipy.stats.poisson`:
    the same methods and arguments, differentiable in mu (counts k carry no gradient).

    Examples
    --------
    >>> mu = tt.tensor(2.0, requires_grad=True)
    >>> nll = -tt.scipy.stats.poisson.logpmf(tt.tensor([0.0, 1.0, 3.0]), mu).sum()
    >>> nll
    tensor(5.01917075, requires_grad=True)
    >>> nll.backward()
    >>> mu.grad                                        # n - sum(k) / mu: 0 at the mean of k
    array(1.)
    >>> tt.scipy.stats.poisson.cdf(1, tt.tensor(2.0))   # 3 exp(-2)
    tensor(0.40600585)
    """
    name = "poisson"

    def logpmf(self, k, mu, loc=0):
        k, whole = _counts(k, loc)
        mu = _arg(mu)
        inside = whole & (k >= 0)
        safe = np.where(inside, k, 0.0)
        ok = _value(mu) >= 0
        mu = _inside(ok, mu, 1.0)
        return _valid(ok, _where(inside, sp.xlogy(safe, mu) - sp.gammaln(safe + 1) - mu, -np.inf))

    def cdf(self, k, mu, loc=0):
        k = np.floor(_value(k) - _value(loc))
        inside, ok = k >= 0, _value(mu) >= 0
        value = sp.gammaincc(np.where(inside, k, 0.0) + 1, _inside(ok, _arg(mu), 1.0))
        return _valid(ok, _where(inside, value, 0.0))

    def sf(self, k, mu, loc=0):
        k = np.floor(_value(k) - _value(loc))
        inside, ok = k >= 0, _value(mu) >= 0
        value = sp.gammainc(np.where(inside, k, 0.0) + 1, _inside(ok, _arg(mu), 1.0))
        return _valid(ok, _where(inside, value, 1.0))


class _Bernoulli(_Discrete):
    """The Bernoulli distribution, as `scipy.stats.bernoulli`:
    the same methods and arguments, differentiable in p (outcomes k carry no gradient).

    Examples
    --------
    >>> p = tt.tensor(0.3, requires_grad=True)
    >>> ll = tt.scipy.stats.bernoulli.logpmf(tt.tensor([1.0, 0.0, 1.0]), p).sum()
    >>> ll                                             # 2 log 0.3 + log 0.7
    tensor(-2.76462055, requires_grad=True)
    >>> ll.backward()
    >>> p.grad                                         # 2 / 0.3 - 1 / 0.7
    array(5.23809524)
    """
    name = "bernoulli"

    def logpmf(self, k, p, loc=0):
        k, whole = _counts(k, loc)
        p = _arg(p)
        inside = whole & (k >= 0) & (k <= 1)
        safe = np.where(inside, k, 0.0)
        ok = _probability(p)
        p = _inside(ok, p, 0.5)
        return _valid(ok, _where(inside, sp.xlogy(safe, p) + sp.xlog1py(1 - safe, -p), -np.inf))

    def cdf(self, k, p, loc=0):
        k = _value(k) - _value(loc)
        q = 1.0 - _arg(p)
        return _valid(_probability(p), ew.where(k >= 1, 1.0, ew.where(k >= 0, q, 0.0)))


def _count(n):
    """Where n is a whole number >= 0 (SciPy's argument check for binom)."""
    n = _value(n)
    return (n >= 0) & (n == np.floor(n))


class _Binom(_Discrete):
    """The binomial distribution, as `scipy.stats.binom`:
    the same methods and arguments, differentiable in p (and in n, but for cdf, where an n that
    requires grad raises); counts k carry no gradient.

    Examples
    --------
    >>> p = tt.tensor(0.3, requires_grad=True)
    >>> lp = tt.scipy.stats.binom.logpmf(2, 10, p)       # 2 successes in 10 trials
    >>> lp
    tensor(-1.45468267, requires_grad=True)
    >>> lp.backward()
    >>> p.grad                                         # 2 / p - 8 / (1 - p)
    array(-4.76190476)
    >>> tt.scipy.stats.binom.pmf(tt.tensor([0.0, 1.0, 2.0]), 2, tt.tensor(0.5))
    tensor([0.25, 0.5 , 0.25])
    """
    name = "binom"

    def logpmf(self, k, n, p, loc=0):
        k, whole = _counts(k, loc)
        n, p = _arg(n), _arg(p)
        ok = _probability(p) & _count(n)
        p = _inside(ok, p, 0.5)
        inside = whole & (k >= 0) & (k <= _value(n))
        safe = np.where(inside, k, 0.0)
        combinations = sp.gammaln(n + 1) - sp.gammaln(safe + 1) - sp.gammaln(n - safe + 1)
        value = combinations + sp.xlogy(safe, p) + sp.xlog1py(n - safe, -p)
        return _valid(ok, _where(inside, value, -np.inf))

    def cdf(self, k, n, p, loc=0):
        k = np.floor(_value(k) - _value(loc))
        n = _constant("binom.cdf", "n", n)
        ok = _probability(p) & _count(n)
        inside = (k >= 0) & (k < n)
        safe = np.where(inside, k, 0.0)
        value = sp.betainc(np.where(inside, n - safe, 1.0), safe + 1, 1.0 - _inside(ok, _arg(p), 0.5))
        return _valid(ok, _where(inside, value, (k >= n).astype(float)))


# ----- multivariate ---------------------------------------------------------------------------------------
class _MultivariateNormal(_Distribution):
    """The multivariate normal distribution, as `scipy.stats.multivariate_normal`:
    logpdf and pdf with the same arguments, differentiable in every Tensor argument (x, mean,
    cov); cdf raises (SciPy integrates it numerically).

    Examples
    --------
    >>> mean = tt.tensor([0.0, 1.0], requires_grad=True)
    >>> cov = tt.tensor([[2.0, 0.5], [0.5, 1.0]])
    >>> lp = tt.scipy.stats.multivariate_normal.logpdf(tt.tensor([1.0, 1.0]), mean, cov)
    >>> lp
    tensor(-2.40339925, requires_grad=True)
    >>> lp.backward()
    >>> mean.grad                                      # cov^-1 (x - mean)
    array([ 0.57142857, -0.28571429])
    >>> points = tt.tensor([[1.0, 1.0], [0.0, 0.0]])    # a batch: one value per row
    >>> tt.scipy.stats.multivariate_normal(mean=mean.detach(), cov=cov).logpdf(points)
    tensor([-2.40339925, -2.68911353])
    """
    name = "multivariate_normal"

    def __call__(self, mean=None, cov=1, allow_singular=False, seed=None):
        return _Frozen(self, (), dict(mean=mean, cov=cov, allow_singular=allow_singular))

    @staticmethod
    def _parameters(x, mean, cov):
        cov_value = _value(cov)
        if mean is not None:
            dim = int(np.size(_value(mean)))
        elif cov_value.ndim:
            dim = cov_value.shape[0]
        else:
            dim = 1                        # SciPy's reading of a scalar cov without a mean
        mean = np.zeros(dim) if mean is None else _arg(mean)
        cov = _arg(cov)
        if cov_value.ndim == 0:
            cov = cov * np.eye(dim)
        elif cov_value.ndim == 1:
            cov = cov * np.eye(dim)       # the variances on the diagonal
        if np.shape(_value(cov)) != (dim, dim):
            raise ValueError(f"multivariate_normal: cov must be ({dim}, {dim}) for a mean of "
                             f"dimension {dim}, got shape {np.shape(_value(cov))}")
        x = _arg(x)
        ndim = np.ndim(_value(x))
        if ndim == 0:
            x = np.reshape(x, (1,))
        elif ndim == 1 and dim == 1:
            x = np.reshape(x, (-1, 1))     # SciPy's reading: a batch of 1-D points
        return x, np.reshape(mean, (dim,)), cov, dim

    def logpdf(self, x, mean=None, cov=1, allow_singular=False):
        """log N(x; mean, cov), x of shape (..., dim); SciPy's squeezed output shape. With
        allow_singular, SciPy's reading of a singular cov: the density on its range (pseudo-
        determinant, pseudo-inverse, from eigh), -inf off it."""
        x, mean, cov, dim = self._parameters(x, mean, cov)
        if allow_singular:
            return self._logpdf_singular(x, mean, cov, dim)
        lower = tt_linalg.cholesky(cov)
        residual = x - mean
        batch = np.shape(_value(residual))[:-1]
        z = tt_linalg.solve(lower, np.reshape(residual, (-1, dim)).T)         # (dim, points)
        logdet = 2 * ops.sum(np.log(np.diagonal(lower)))
        out = -0.5 * (dim * LOG_2PI + logdet + ops.sum(z * z, axis=0))
        return np.squeeze(np.reshape(out, batch))

    @staticmethod
    def _logpdf_singular(x, mean, cov, dim):
        s, u = tt_linalg.eigh(cov)
        values = _value(s)
        eps = {np.dtype(np.float32): 1e3, np.dtype(np.float64): 1e6}.get(values.dtype, 1e6) * \
            np.finfo(values.dtype).eps * np.max(np.abs(values))        # SciPy's _eigvalsh_to_eps
        if np.min(values) < -eps:
            raise ValueError("multivariate_normal: the covariance matrix must be symmetric positive "
                             "semidefinite")
        kept = values > eps
        whiten = u[:, kept] / np.sqrt(s[kept])                          # (dim, rank)
        residual = x - mean
        batch = np.shape(_value(residual))[:-1]
        flat = np.reshape(residual, (-1, dim))
        maha = ops.sum((flat @ whiten) ** 2, axis=-1)
        out = -0.5 * (int(kept.sum()) * LOG_2PI + ops.sum(np.log(s[kept])) + maha)
        null_space = _value(u)[:, ~kept]
        off = np.linalg.norm(_value(flat) @ null_space, axis=-1) >= 1e3 * eps   # SciPy's support test
        out = _where(~off, out, -np.inf)
        return np.squeeze(np.reshape(out, batch))

    def pdf(self, x, mean=None, cov=1, allow_singular=False):
        return np.exp(self.logpdf(x, mean, cov, allow_singular))

    def entropy(self, mean=None, cov=1, allow_singular=False):
        """The differential entropy (rank (1 + log 2 pi) + log det cov) / 2, as SciPy's (rank and
        pseudo-determinant from eigh with allow_singular); differentiable in cov (mean has none)."""
        _, _, cov, dim = self._parameters(0.0, mean, cov)
        if allow_singular:
            s = tt_linalg.eigvalsh(cov)
            values = _value(s)
            kept = values > 1e6 * np.finfo(values.dtype).eps * np.max(np.abs(values))
            return 0.5 * (int(kept.sum()) * (LOG_2PI + 1) + ops.sum(np.log(s[kept])))
        logdet = 2 * ops.sum(np.log(np.diagonal(tt_linalg.cholesky(cov))))
        return 0.5 * (dim * (LOG_2PI + 1) + logdet)

    def cdf(self, *args, **kwds):
        raise NotImplementedError("tt.scipy.stats.multivariate_normal.cdf is not differentiable here "
                                  "(SciPy integrates it numerically); use the values: "
                                  "scipy.stats.multivariate_normal.cdf(x.detach(), ...)")


class _Dirichlet(_Distribution):
    """The Dirichlet distribution, as `scipy.stats.dirichlet`:
    logpdf and pdf with the same arguments, differentiable in x and alpha.

    Examples
    --------
    >>> alpha = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> lp = tt.scipy.stats.dirichlet.logpdf(tt.tensor([0.2, 0.3, 0.5]), alpha)
    >>> lp
    tensor(1.5040774, requires_grad=True)
    >>> lp.backward()
    >>> alpha.grad                                     # log x - digamma(alpha) + digamma(sum(alpha))
    array([0.67389542, 0.07936053, 0.09018615])
    """
    name = "dirichlet"

    def __call__(self, alpha, seed=None):
        return _Frozen(self, (alpha,), {})

    def logpdf(self, x, alpha):
        """x of shape (K, ...) or (K - 1, ...) (the last component 1 - sum), alpha of shape (K,)."""
        alpha = _arg(alpha)
        if np.ndim(_value(alpha)) != 1:
            raise ValueError(f"dirichlet: alpha must be 1-D, got shape {np.shape(_value(alpha))}")
        k = np.shape(_value(alpha))[0]
        x = _arg(x)
        if np.shape(_value(x))[0] == k - 1:
            x = ops.concatenate([x, 1.0 - ops.sum(x, axis=0, keepdims=True)], axis=0)
        values = _value(x)
        if np.shape(values)[0] != k:
            raise ValueError(f"dirichlet: x must have {k} or {k - 1} entries along axis 0 (alpha has "
                             f"{k}), got shape {np.shape(values)}")
        if np.any(values < 0) or np.any(values > 1) or not np.allclose(values.sum(axis=0), 1):
            raise ValueError("dirichlet: each x must lie in the simplex (entries in [0, 1] summing to 1)")
        alpha_values = _value(alpha)
        if np.any(alpha_values <= 0):    # SciPy's checks and words
            raise ValueError("dirichlet: All parameters must be greater than 0")
        small = np.reshape(alpha_values < 1, (k,) + (1,) * (np.ndim(values) - 1))
        if np.any((values == 0) & small):
            raise ValueError("dirichlet: Each entry in 'x' must be greater than zero if its alpha is "
                             "less than one.")
        a = np.reshape(alpha, (k,) + (1,) * (np.ndim(values) - 1))
        log_norm = ops.sum(sp.gammaln(alpha)) - sp.gammaln(ops.sum(alpha))
        return ops.sum(sp.xlogy(a - 1, x), axis=0) - log_norm

    def pdf(self, x, alpha):
        return np.exp(self.logpdf(x, alpha))


norm = _Norm()
t = _T()
gamma = _Gamma()
chi2 = _Chi2()
beta = _Beta()
poisson = _Poisson()
bernoulli = _Bernoulli()
binom = _Binom()
multivariate_normal = _MultivariateNormal()
dirichlet = _Dirichlet()

__all__ = ["norm", "t", "gamma", "chi2", "beta", "poisson", "bernoulli", "binom",
           "multivariate_normal", "dirichlet"]
