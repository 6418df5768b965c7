"""tt.scipy.stats against scipy.stats on broadcast inputs, and its gradients (value and
parameters) against central differences, in both modes (tt.gradcheck)."""

import numpy as np
import pytest
import scipy.stats as ss

import tinytensor as tt
from tinytensor.scipy import stats as ts

RNG = np.random.default_rng(0)


def _ids(v):
    return v if isinstance(v, str) else ""


def close(a, b, rtol=1e-10):
    np.testing.assert_allclose(a.data if isinstance(a, tt.Tensor) else a, b, rtol=rtol)

X = RNG.standard_normal((2, 3))               # values, broadcast against parameters of shape (3,)
POS = RNG.uniform(0.5, 2.0, (3,))
UNIT = RNG.uniform(0.1, 0.9, (2, 3))

# (distribution, method, float arguments of SciPy's call)
CONTINUOUS = [
    ("norm", m, (X, RNG.standard_normal(3), POS)) for m in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
] + [("norm", "ppf", (UNIT, 0.3, POS))] + [
    ("t", m, (X, POS + 1, RNG.standard_normal(3), POS)) for m in ("logpdf", "pdf")
] + [("gamma", m, (POS + UNIT, POS + 0.5, 0.1, POS)) for m in ("logpdf", "pdf")] + [
    ("beta", m, (UNIT, POS + 0.5, POS + 1.0)) for m in ("logpdf", "pdf")
] + [("chi2", "logpdf", (POS + UNIT, POS + 2))]
CDF_IN_X = [   # shape parameters constant: (dist, method, constants, float arguments)
    ("t", "cdf", (POS + 1,), (X, 0.2, POS)), ("gamma", "cdf", (POS + 0.5,), (POS + UNIT,)),
    ("gamma", "sf", (POS + 0.5,), (POS + UNIT, 0.1, 1.5)), ("beta", "cdf", (2.0, 3.0), (UNIT,)),
    ("chi2", "cdf", (3.0,), (POS + UNIT,)), ("chi2", "logsf", (3.0,), (POS + UNIT,)),
]
K = np.array([[0.0, 1.0, 3.0], [2.0, 5.0, 1.0]])
DISCRETE = [("poisson", m, K, (POS * 2,)) for m in ("logpmf", "pmf", "cdf", "sf", "logcdf")] + [
    ("bernoulli", m, np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]), (UNIT[0],)) for m in ("logpmf", "pmf")
] + [("binom", m, K, None) for m in ("logpmf", "pmf", "cdf", "logsf")]


@pytest.mark.parametrize("dist, method, args", CONTINUOUS, ids=_ids)
def test_continuous_values_and_gradients(dist, method, args):
    ours, theirs = getattr(getattr(ts, dist), method), getattr(getattr(ss, dist), method)
    out = ours(*[tt.tensor(a) for a in args])
    np.testing.assert_allclose(out.data, theirs(*args), rtol=1e-10, atol=1e-300)
    tt.gradcheck(lambda *a: ours(*a), *[np.asarray(a, dtype=float) for a in args])


@pytest.mark.parametrize("dist, method, constants, args", CDF_IN_X, ids=_ids)
def test_cdfs_in_the_value_loc_and_scale(dist, method, constants, args):
    ours, theirs = getattr(getattr(ts, dist), method), getattr(getattr(ss, dist), method)
    call = lambda x, *rest: ours(x, *constants, *rest)   # noqa: E731
    close(call(*[tt.tensor(a) for a in args]), theirs(args[0], *constants, *args[1:]))
    tt.gradcheck(call, *[np.asarray(a, dtype=float) for a in args])


@pytest.mark.parametrize("dist, method, k, params", DISCRETE, ids=_ids)
def test_discrete_values_and_gradients_in_the_parameters(dist, method, k, params):
    if dist == "binom":
        ours = lambda p: getattr(ts.binom, method)(k, 6, p)          # noqa: E731
        reference, params = getattr(ss.binom, method)(k, 6, UNIT[0]), (UNIT[0],)
    else:
        ours = lambda *p: getattr(getattr(ts, dist), method)(k, *p)   # noqa: E731
        reference = getattr(getattr(ss, dist), method)(k, *params)
    np.testing.assert_allclose(ours(*[tt.tensor(p) for p in params]).data, reference, rtol=1e-10)
    tt.gradcheck(ours, *params)


def test_outside_the_support_the_values_are_scipys_and_gradients_zero():
    x = tt.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    out = ts.gamma.logpdf(x, 2.0)
    np.testing.assert_array_equal(out.data, ss.gamma.logpdf(x.data, 2.0))
    tt.sum(ts.gamma.pdf(x, 2.0)).backward()
    assert x.grad[0] == 0 and np.isfinite(x.grad).all()
    np.testing.assert_array_equal(ts.poisson.logpmf([-1, 1.5, 2], 3.0), ss.poisson.logpmf([-1, 1.5, 2], 3.0))
    assert np.isnan(ts.norm.logpdf(0.0, 0.0, -1.0))


def test_frozen_distributions_and_scipys_other_methods():
    close(ts.norm(1.0, 2.0).logpdf(X), ss.norm(1.0, 2.0).logpdf(X))
    assert ts.norm.mean(2.0, 3.0) == 2.0   # SciPy's own, on values


@pytest.mark.parametrize("x_shape", [(3,), (4, 3), (2, 4, 3)])
def test_multivariate_normal(x_shape):
    mean = RNG.standard_normal(3)
    a = RNG.standard_normal((3, 3))
    cov = a @ a.T + 3 * np.eye(3)
    x = RNG.standard_normal(x_shape)
    out = ts.multivariate_normal.logpdf(tt.tensor(x), mean, cov)
    np.testing.assert_allclose(out.data, ss.multivariate_normal.logpdf(x, mean, cov), rtol=1e-10)
    close(ts.multivariate_normal(mean, cov).pdf(x), ss.multivariate_normal(mean, cov).pdf(x))
    if x_shape == (4, 3):
        sym = lambda m: (m + m.T) / 2      # noqa: E731   the gradient in a symmetric cov
        tt.gradcheck(lambda x, m, c: ts.multivariate_normal.logpdf(x, m, sym(c)), x, mean, cov)
    for kw in (dict(mean=mean, cov=2.0), dict(mean=mean, cov=np.array([1.0, 2.0, 3.0]))):
        close(ts.multivariate_normal.logpdf(x, **kw), ss.multivariate_normal.logpdf(x, **kw))
    one_d = x.reshape(-1)   # no mean and a scalar cov: SciPy reads points of dimension 1
    np.testing.assert_allclose(ts.multivariate_normal.logpdf(one_d, cov=2.0),
                               ss.multivariate_normal.logpdf(one_d, cov=2.0), rtol=1e-10)


def test_dirichlet():
    alpha = np.array([1.5, 2.0, 3.0])
    x = RNG.dirichlet(alpha, size=4).T                  # (K, N), as SciPy
    close(ts.dirichlet.logpdf(tt.tensor(x), alpha), ss.dirichlet.logpdf(x, alpha))
    close(ts.dirichlet.pdf(x[:2, 0], alpha), ss.dirichlet.pdf(x[:2, 0], alpha))
    tt.gradcheck(lambda a: ts.dirichlet.logpdf(x, a), alpha)
    with pytest.raises(ValueError, match="simplex"):
        ts.dirichlet.logpdf(np.array([0.5, 0.6, 0.1]), alpha)


def test_a_shape_parameter_inside_betainc_is_refused():
    with pytest.raises(TypeError, match="t.cdf: not differentiable in df"):
        ts.t.cdf(0.3, tt.tensor(3.0, requires_grad=True))


# ----- issue 30: the closed edges of each support, infinite values, degenerate parameters -------------
from tinytensor.scipy.specs import STATS_EDGES  # noqa: E402


def test_every_distribution_has_an_edge_row():
    assert set(ts.__all__) <= set(STATS_EDGES), set(ts.__all__) - set(STATS_EDGES)


@pytest.mark.parametrize("name", sorted(STATS_EDGES))
def test_edges_equal_scipys(name):
    for method, args in STATS_EDGES[name]:
        with np.errstate(all="ignore"):
            expected = getattr(getattr(ss, name), method)(*args)
            ours = getattr(getattr(ts, name), method)(*[tt.tensor(a) for a in args])
        np.testing.assert_allclose(ours.data if isinstance(ours, tt.Tensor) else ours, expected,
                                   rtol=1e-12, err_msg=f"{name}.{method}{args}")


@pytest.mark.parametrize("name, args, slope", [
    ("gamma", (0.0, 1.0), -1.0),                 # the exponential's log density -x, at x = 0
    ("beta", (0.0, 1.0, 2.0), -1.0),             # log 2 + log(1 - x)
    ("beta", (1.0, 2.0, 1.0), 1.0),              # log 2 + log x
    ("chi2", (0.0, 2.0), -0.5),
])
def test_the_gradient_at_a_closed_edge_is_the_one_sided_slope(name, args, slope):
    g = tt.grad(lambda x: getattr(ts, name).logpdf(x, *args[1:]))(args[0])
    np.testing.assert_allclose(g, slope, rtol=1e-12)
    da = tt.grad(lambda a: getattr(ts, name).logpdf(args[0], a, *args[2:]))(args[1])
    assert np.isfinite(da)


def test_dirichlet_refuses_what_scipy_refuses():
    with pytest.raises(ValueError, match="greater than zero"):
        ts.dirichlet.logpdf(np.array([0.0, 0.3, 0.7]), np.array([0.5, 2.0, 3.0]))
    with pytest.raises(ValueError, match="greater than 0"):
        ts.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), np.array([0.0, 1.0, 1.0]))


def test_norm_ppf_is_differentiable_in_q():
    q = np.array([0.1, 0.5, 0.97])
    g = tt.grad(lambda q: tt.sum(ts.norm.ppf(q, 1.0, 2.0)))(q)
    np.testing.assert_allclose(g, 2.0 / ss.norm.pdf(ss.norm.ppf(q)), rtol=1e-12)
    tt.gradcheck(lambda q, s: ts.norm.ppf(q, 0.3, s), q, np.array([0.5, 1.0, 2.0]))


@pytest.mark.parametrize("x, mean, cov", [
    ([1.0, 1.0], [0.0, 0.0], [[1.0, 1.0], [1.0, 1.0]]),        # on the singular support
    ([1.0, -1.0], [0.0, 0.0], [[1.0, 1.0], [1.0, 1.0]]),       # off it: -inf
    ([[0.3, 0.2], [1.0, 1.0]], [0.1, 0.0], [[2.0, 0.0], [0.0, 2.0]]),   # not singular: as cholesky
    ([1.0, 2.0], [0.0, 0.0], [[0.0, 0.0], [0.0, 0.0]]),
])
def test_multivariate_normal_allow_singular_equals_scipy(x, mean, cov):
    x, mean, cov = (np.asarray(v, dtype=float) for v in (x, mean, cov))
    expected = ss.multivariate_normal.logpdf(x, mean, cov, allow_singular=True)
    close(ts.multivariate_normal.logpdf(x, mean, cov, allow_singular=True), expected, rtol=1e-12)
    close(ts.multivariate_normal(mean, cov, allow_singular=True).pdf(x),
          ss.multivariate_normal(mean, cov, allow_singular=True).pdf(x), rtol=1e-12)


def test_allow_singular_gradient_along_the_support():
    cov = np.array([[1.0, 1.0], [1.0, 1.0]])
    g = tt.grad(lambda x: ts.multivariate_normal.logpdf(x, np.zeros(2), cov, allow_singular=True))(np.ones(2))
    np.testing.assert_allclose(g, -np.linalg.pinv(cov) @ np.ones(2), rtol=1e-12)
    with pytest.raises(ValueError, match="semidefinite"):
        ts.multivariate_normal.logpdf(np.ones(2), np.zeros(2), -np.eye(2), allow_singular=True)


def test_multivariate_normal_entropy_matches_scipy_and_differences():
    """HIPS autograd's test_mvn_entropy: entropy(mean, cov) = (d (1 + log 2 pi) + log det cov) / 2."""
    a = RNG.standard_normal((3, 3))
    cov = a @ a.T + np.eye(3)
    mean = RNG.standard_normal(3)
    close(ts.multivariate_normal.entropy(mean, tt.tensor(cov)), ss.multivariate_normal.entropy(mean, cov))
    close(ts.multivariate_normal(mean, cov).entropy(), ss.multivariate_normal(mean, cov).entropy())
    tt.gradcheck(lambda c: ts.multivariate_normal.entropy(mean, 0.5 * (c + c.T)), cov)
