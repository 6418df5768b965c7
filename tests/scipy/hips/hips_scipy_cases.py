"""HIPS autograd's SciPy tests (tests/test_scipy.py of github.com/HIPS/autograd, MIT license,
(c) 2014 by the Authors of autograd), ported to tinytensor: the same test names, functions,
differentiated arguments, input shapes and domains, and autograd's check (hips_check.py), with
`autograd.numpy`/`autograd.scipy` replaced by tinytensor through hips_shim.py. Written anew as a
table: CASES maps each test's name to a function of a seeded RandomState that runs its checks.

autograd's file defines 94 test functions, test_sqrtm twice (the second replaces the first), so
pytest collects 93, and so does this table. Each case's inputs come from its own seeded generator.
"""

from functools import partial

import hips_check
import numpy as onp
import scipy.signal
from hips_check import check_grads, combo_check, unary_ufunc_check
from hips_shim import integrate, linalg, signal, special, stats
from hips_shim import numpy_ns as np

import tinytensor as tt

mvn = stats.multivariate_normal


def symmetrize(fun, argnum):
    """fun with its argnum-th argument replaced by (X + X^T) / 2 (so a perturbed covariance stays
    symmetric)."""
    def symmetrized(*args, **kwargs):
        args = list(args)
        X = args[argnum]
        args[argnum] = 0.5 * (X + (np.swapaxes(X, -1, -2) if np.ndim(X) > 1 else X))
        return fun(*args, **kwargs)
    return symmetrized


def psd(m):
    return onp.dot(m.T, m) + onp.eye(m.shape[0])


def positive(R, *shape):
    return R(*shape) ** 2 + 1.1


# ----- stats ---------------------------------------------------------------------------------
def _stats(name, method, argnums, args):
    """A combo check of stats.<name>.<method>; args(R, U) gives the list of choices per argument."""
    return lambda rs, R, U: combo_check(getattr(getattr(stats, name), method), argnums, rs=rs)(*args(R, U))


CASES = {}
_x4 = lambda R, U: ([R(4) ** 2 + 1.1], [1, 2, 3])                                     # noqa: E731
for m in ("pdf", "cdf", "logpdf"):
    CASES[f"chi2_{m}"] = _stats("chi2", m, [0], _x4)
_beta = lambda R, U: ([U(0.0, 1.0, 4)], [positive(R, 4)], [positive(R, 4)])           # noqa: E731
CASES["beta_cdf"] = _stats("beta", "cdf", [0], _beta)
CASES["beta_pdf"] = _stats("beta", "pdf", [0, 1, 2], _beta)
CASES["beta_logpdf"] = _stats("beta", "logpdf", [0, 1, 2], _beta)
_gamma = lambda R, U: ([positive(R, 4)], [positive(R, 4)])                              # noqa: E731
CASES["gamma_cdf"] = _stats("gamma", "cdf", [0], _gamma)
CASES["gamma_pdf"] = _stats("gamma", "pdf", [0, 1], _gamma)
CASES["gamma_logpdf"] = _stats("gamma", "logpdf", [0, 1], _gamma)
_norm = lambda R, U: ([R(4)], [R(4)], [positive(R, 4)])                                 # noqa: E731
_norm_q = lambda R, U: ([U(0.05, 0.95, 4)], [R(4)], [positive(R, 4)])                   # noqa: E731
_norm_b = lambda R, U: ([R(4, 3)], [R(1, 3)], [positive(R, 4, 1)])                      # noqa: E731
_norm_qb = lambda R, U: ([U(0.05, 0.95, (4, 3))], [R(1, 3)], [positive(R, 4, 1)])      # noqa: E731
for m in ("pdf", "cdf", "sf", "logpdf", "logcdf", "logsf"):
    CASES[f"norm_{m}"] = _stats("norm", m, [0, 1, 2], _norm)
for m in ("ppf", "isf"):
    CASES[f"norm_{m}"] = _stats("norm", m, [0, 1, 2], _norm_q)
# autograd's sf_broadcast and logsf_broadcast check cdf and logcdf (a slip in its file, kept)
for m, used in (("pdf", "pdf"), ("cdf", "cdf"), ("sf", "cdf"), ("logpdf", "logpdf"), ("logcdf", "logcdf"),
                ("logsf", "logcdf")):
    CASES[f"norm_{m}_broadcast"] = _stats("norm", used, [0, 1, 2], _norm_b)
for m in ("ppf", "isf"):
    CASES[f"norm_{m}_broadcast"] = _stats("norm", m, [0, 1, 2], _norm_qb)
_poisson = lambda R, U: ([onp.round(R(4) ** 2)], [positive(R, 4)])                       # noqa: E731
_poisson_b = lambda R, U: ([onp.round(R(4, 3) ** 2)], [positive(R, 4, 1)])               # noqa: E731
for m in ("cdf", "logpmf", "pmf"):
    CASES[f"poisson_{m}"] = _stats("poisson", m, [1], _poisson)
for m in ("cdf", "logpmf", "pmf"):
    CASES[f"poisson_{m}_broadcast"] = _stats("poisson", m, [1], _poisson_b)
_t = lambda R, U: ([R(4)], [R(4) ** 2 + 2.1], [R(4)], [R(4) ** 2 + 2.1])               # noqa: E731
_t_b = lambda R, U: ([R(4, 3)], [R(1, 3) ** 2 + 2.1], [R(4, 3)], [R(4, 1) ** 2 + 2.1])  # noqa: E731
for m, argnums in (("pdf", [0, 1, 2, 3]), ("cdf", [0, 2]), ("logpdf", [0, 1, 2, 3]), ("logcdf", [0, 2])):
    CASES[f"t_{m}"] = _stats("t", m, argnums, _t)
    CASES[f"t_{m}_broadcast"] = _stats("t", m, argnums, _t_b)


def _mvn(method, x_shape):
    def case(rs, R, U):
        choices = dict(allow_singular=[False]) if x_shape == (4,) else {}
        combo_check(symmetrize(getattr(mvn, method), 2), [0, 1, 2], rs=rs)(
            [R(*x_shape)], [R(4)], [psd(R(4, 4))], **choices)
    return case


CASES["mvn_pdf"] = _mvn("pdf", (4,))
CASES["mvn_logpdf"] = _mvn("logpdf", (4,))
CASES["mvn_entropy"] = lambda rs, R, U: combo_check(symmetrize(mvn.entropy, 1), [0, 1], rs=rs)(
    [10 * R(4)], [psd(R(4, 4))])


def _mvn_singular(rs, R, U):
    cov = onp.zeros((4, 4))
    cov[0, 0] = cov[1, 1] = 1
    for method in (mvn.pdf, mvn.logpdf):
        def f(x, mean, cov, method=method):      # x varies only where the variance is not zero
            x = np.concatenate([x[:2], mean[2:]])
            return symmetrize(partial(method, allow_singular=True), 2)(x, mean, cov)
        point = lambda: onp.concatenate((R(2), onp.zeros(2)))       # noqa: E731
        combo_check(f, [0, 1], rs=rs)([point()], [point()], [cov])


CASES["mvn_sing_cov"] = _mvn_singular
CASES["mvn_pdf_broadcast"] = _mvn("pdf", (5, 4))
CASES["mvn_logpdf_broadcast"] = _mvn("logpdf", (5, 4))


def _dirichlet(method, argnum):
    def case(rs, R, U):
        alpha = rs.random_sample(4) ** 2 + 1.2
        x = onp.asarray(scipy.stats.dirichlet.rvs(alpha, size=1, random_state=rs))[0, :]
        f = getattr(stats.dirichlet, method)
        if argnum == 0:   # x renormalised, so that a perturbed x still sums to one
            g = lambda x, alpha: f(x / sum(x), alpha)                 # noqa: E731
            g.__name__ = f"normalized_dirichlet_{method}"
        combo_check(g if argnum == 0 else f, [argnum], rs=rs)([x], [alpha])
    return case


for m in ("pdf", "logpdf"):
    CASES[f"dirichlet_{m}_x"] = _dirichlet(m, 0)
    CASES[f"dirichlet_{m}_alpha"] = _dirichlet(m, 1)

# ----- logsumexp (autograd checks these in both modes) -----------------------------------------
_lse = partial(combo_check, special.logsumexp, [0])
CASES["logsumexp1"] = lambda rs, R, U: _lse(rs=rs)([onp.array([1.1]), R(4), R(3, 4)], axis=[None, 0],
                                                   keepdims=[True, False])
CASES["logsumexp2"] = lambda rs, R, U: _lse(rs=rs)([R(3, 4), R(4, 5, 6), R(1, 5)], axis=[None, 0, 1],
                                                   keepdims=[True, False])
CASES["logsumexp3"] = lambda rs, R, U: _lse(rs=rs)([R(4)], b=[onp.exp(R(4))], axis=[None, 0],
                                                   keepdims=[True, False])
CASES["logsumexp4"] = lambda rs, R, U: _lse(rs=rs)([R(3, 4)], b=[onp.exp(R(3, 4))], axis=[None, 0, 1],
                                                   keepdims=[True, False])
CASES["logsumexp5"] = lambda rs, R, U: _lse(rs=rs)([R(2, 3, 4)], b=[onp.exp(R(2, 3, 4))],
                                                   axis=[None, 0, 1], keepdims=[True, False])


def _logsumexp6(rs, R, U):
    x = R(1, 5)
    f = lambda a: special.logsumexp(a, axis=1, keepdims=True)      # noqa: E731
    check_grads(f, rs=rs)(x)
    check_grads(lambda a: tt.grad(f)(a), rs=rs)(x)


CASES["logsumexp6"] = _logsumexp6


# ----- signal: autograd's convolve(A, B, axes=, dot_axes=, mode=) ---------------------------------
def _convolve_generalization(rs, R, U):
    A35, A34, A342, A2543, A24232 = R(3, 5), R(3, 4), R(3, 4, 2), R(2, 5, 4, 3), R(2, 4, 2, 3, 2)
    conv, ref = signal.convolve, scipy.signal.convolve
    for mode in ("valid", "full"):
        checks = [
            (conv(A35, A34, axes=([1], [0]), mode=mode)[1, 2], ref(A35[1, :], A34[:, 2], mode)),
            (conv(A35, A34, axes=([], []), dot_axes=([0], [0]), mode=mode),
             onp.tensordot(A35, A34, ([0], [0]))),
            (conv(A35, A342, axes=([1], [2]), dot_axes=([0], [0]), mode=mode)[2],
             sum(ref(A35[i, :], A342[i, 2, :], mode) for i in range(3))),
            (conv(A2543, A24232, axes=([1, 2], [2, 4]), dot_axes=([0, 3], [0, 3]), mode=mode)[2],
             sum(ref(A2543[i, :, :, j], A24232[i, 2, :, j, :], mode) for i in range(2) for j in range(3))),
        ]
        for ours, theirs in checks:
            assert onp.allclose(onp.asarray(getattr(ours, "data", ours)), theirs), mode


CASES["convolve_generalization"] = _convolve_generalization
_modes = ["full", "valid", "same"]
CASES["convolve"] = lambda rs, R, U: combo_check(signal.convolve, [0, 1], rs=rs)(
    [R(4), R(5), R(6)], [R(2), R(3), R(4)], mode=_modes)
CASES["convolve_2d"] = lambda rs, R, U: combo_check(signal.convolve, [0, 1], rs=rs)(
    [R(4, 3), R(5, 4), R(6, 7)], [R(2, 2), R(3, 2), R(4, 2), R(4, 1)], mode=_modes)
CASES["convolve_ignore"] = lambda rs, R, U: combo_check(signal.convolve, [0, 1], rs=rs)(
    [R(4, 3)], [R(3, 2)], axes=[([0], [0]), ([1], [1]), ([0], [1]), ([1], [0]), ([0, 1], [0, 1]),
                                ([1, 0], [1, 0])], mode=_modes)
CASES["convolve_ignore_dot"] = lambda rs, R, U: combo_check(signal.convolve, [0, 1], rs=rs)(
    [R(3, 3, 2)], [R(3, 2, 3)], axes=[([1], [1])], dot_axes=[([0], [2]), ([0], [0])], mode=_modes)

# ----- special -------------------------------------------------------------------------------
CASES["beta"] = lambda rs, R, U: combo_check(special.beta, [0, 1], rs=rs)([positive(R, 4)], [positive(R, 4)])
CASES["betainc"] = lambda rs, R, U: combo_check(special.betainc, [2], rs=rs)(
    [positive(R, 4)], [positive(R, 4)], [U(0.0, 1.0, 4)])
CASES["betaln"] = lambda rs, R, U: combo_check(special.betaln, [0, 1], rs=rs)(
    [positive(R, 4)], [positive(R, 4)])
for _name, _order in (("gammainc", 1), ("gammaincc", 1), ("polygamma", 0), ("jn", 2), ("yn", 2)):
    CASES[_name] = (lambda name, order: lambda rs, R, U: combo_check(getattr(special, name), [1], rs=rs)(
        [order], [R(4) ** 2 + 1.3]))(_name, _order)
for _name, _lims, _complex in (
        ("psi", (0.3, 2.0), False), ("digamma", (0.3, 2.0), False), ("gamma", (0.3, 2.0), False),
        ("gammaln", (0.3, 2.0), False), ("gammasgn", (0.3, 2.0), False), ("rgamma", (0.3, 2.0), False),
        ("j0", (0.2, 20.0), False), ("j1", (0.2, 20.0), False), ("y0", (0.2, 20.0), False),
        ("y1", (0.2, 20.0), False), ("i0", (0.2, 20.0), False), ("i1", (0.2, 20.0), False),
        ("erf", (-3.0, 3.0), True), ("erfc", (-3.0, 3.0), True), ("erfinv", (-0.95, 0.95), False),
        ("erfcinv", (0.05, 1.95), False), ("logit", (0.10, 0.90), False), ("expit", (-4.05, 4.95), False)):
    CASES[_name] = (lambda name, lims, cplx: lambda rs, R, U: unary_ufunc_check(
        getattr(special, name), lims=lims, test_complex=cplx, rs=rs))(_name, _lims, _complex)
CASES["multigammaln"] = lambda rs, R, U: combo_check(special.multigammaln, [0], rs=rs)(
    [U(4.0, 5.0), U(4.0, 5.0, (2, 3))], [1, 2, 3])
for _name in ("iv", "ive"):
    CASES[_name] = (lambda name: lambda rs, R, U: combo_check(getattr(special, name), [1], rs=rs)(
        U(1.0, 50.0, 4), R(4) ** 2 + 1.3))(_name)


# ----- odeint, linalg ---------------------------------------------------------------------------
def _odeint(rs, R, U):
    def func(y, t, arg1, arg2):
        return -np.sqrt(t) - y + arg1 - np.mean((y + arg2) ** 2)
    combo_check(integrate.odeint, [1, 2, 3], rs=rs)(
        [func], [R(3)], [onp.linspace(0.1, 0.2, 4)], [(R(3), R(3))])


CASES["odeint"] = _odeint
CASES["sqrtm"] = lambda rs, R, U: combo_check(symmetrize(linalg.sqrtm, 0), [0], rs=rs)([R(3, 3)])
CASES["solve_sylvester"] = lambda rs, R, U: combo_check(linalg.solve_sylvester, [0, 1, 2], rs=rs)(
    [R(3, 3)], [R(3, 3)], [R(3, 3)])
CASES["solve_banded"] = lambda rs, R, U: combo_check(linalg.solve_banded, [1, 2], order=1, rs=rs)(
    [(1, 1)], [R(3, 5)], [R(5)])


# autograd checks reverse mode only, but for these (its file's `modes=` arguments)
BOTH_MODES = {"logsumexp1", "logsumexp2", "logsumexp3", "logsumexp4", "logsumexp5", "logsumexp6", "sqrtm",
              "solve_sylvester"}

# The cases tinytensor does not pass, and why (decided: not supported, or not met yet).
NOT_SUPPORTED = {
    "erf": "autograd also checks erf at complex points; tinytensor refuses complex inputs to a "
           "transform (README: complex intermediates only, JAX's convention)",
    "erfc": "as erf: the complex points are refused",
    "sqrtm": "autograd differentiates the complex principal square root of a symmetric matrix with "
             "negative eigenvalues; tt.scipy.linalg.sqrtm is real-only and raises (no complex output)",
}
STRICT_FAILS = {   # fail only in the strict run (both modes everywhere), not under autograd's modes
    "odeint": "reverse over forward: the VJP of odeint's forward-sensitivity JVP agrees with central "
              "differences to 8e-6 relative, not autograd's 1e-6, at odeint's default rtol=1.49e-8 "
              "(the difference quotient, eps=1e-6, sees the solver's error); at rtol=atol=1e-10 it passes",
}


def run(name, strict=False):
    """Run one case with its own seeded generator (R: normal draws, U: uniform ones, as autograd's),
    in autograd's modes for it, or in both modes everywhere when strict."""
    rs = onp.random.RandomState(sum(map(ord, name)))
    saved = hips_check.MODES
    hips_check.MODES = ["fwd", "rev"] if strict or name in BOTH_MODES else ["rev"]
    try:
        CASES[name](rs, rs.randn, rs.uniform)
    finally:
        hips_check.MODES = saved
