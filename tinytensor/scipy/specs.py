"""The spec rows of tt.scipy's primitives and composites (specs.py adds them to OP_SPECS and
EXTRA_SPECS, so every sweep checks them).

Each row calls SciPy's own function on the inputs (so `scipy.special.gammaln(t)` reaching the
table is what is tested) and samples inside the function's domain. `rows(table)` builds them when
specs.py asks (at its end), with specs.py's own OpSpec and samplers: this module never imports
specs.py, so the two no longer import each other.
"""

import numpy as np
import scipy.linalg
import scipy.signal
import scipy.special as sp

from .. import ops_science
from ..ops import core as ops_core
from . import linalg, signal, special

# Rows whose forwards are SciPy's (NumPy arrays only): expected to fail on another device
# (tests/device_sweep.py's HOST_ONLY) until a device path (cupyx.scipy.special) is registered.
SCIPY_ONLY = "the forward is SciPy's, on NumPy arrays only (no device path yet)"
HOST_CONSTANTS = "its constants (weights, stencils, grids, masks) are NumPy arrays: not moved to a device yet"


def interval(low, high):
    def sample(rng, shape):
        return rng.uniform(low, high, shape)
    sample.__name__ = f"uniform({low}, {high})"
    return sample


UNIT = interval(0.1, 0.9)
SMALL_UNARY = [((),), ((2, 3),)]
SMALL_BINARY = [((), ()), ((2, 3), (3,)), ((2, 1), (1, 3))]
LSE_B = [(((3, 4), (3, 4)), dict(axis=1, keepdims=False, signed=False)),
         (((3, 4), (4,)), dict(axis=None, keepdims=False, signed=False)),
         (((2, 3), (2, 1)), dict(axis=0, keepdims=True, signed=False))]


def _lse(a, b, **p):
    return special.logsumexp(a, b=b, **p)


def _lse_reference(a, b, **p):
    return sp.logsumexp(a, b=b, **p)


def _lse_signed(a, b, **p):
    return special.logsumexp(a, b=b, return_sign=True, **p)[0]


def _lse_signed_reference(a, b, **p):
    return sp.logsumexp(a, b=b, return_sign=True, **p)[0]


XP = np.array([0.0, 1.0, 2.5, 3.0])                  # np.interp's grid (a constant)
X1 = np.array([-1.0, 0.0, 2.0, 0.0, 0.5])            # np.heaviside's x1 (a constant), zeros included
COORDS = np.array([0.0, 0.5, 1.5, 1.75, 3.0])         # np.gradient's coordinates


def between_knots(rng, shape):    # np.interp's x: inside each interval and outside the grid, off the knots
    points = np.array([-0.4, 0.3, 1.7, 2.8, 3.3])
    return points[rng.integers(0, 5, shape)] + rng.uniform(-0.05, 0.05, shape)


def _gradients(f, *spacing, **params):
    out = np.gradient(f, *spacing, **params)
    return np.stack(out) if isinstance(out, tuple) else out


def _triangular(rng, m, n):   # a well-conditioned triangle: the diagonal in [1, 2]
    a = rng.uniform(-0.5, 0.5, (n, n))
    np.fill_diagonal(a, rng.uniform(1.0, 2.0, n))
    return a


def _small(rng, shape):        # expm: entries of size ~0.5
    return 0.5 * rng.standard_normal(shape)


def _solve_triangular_reference(a, b, lower, unit_diagonal):
    return scipy.linalg.solve_triangular(a, b, lower=lower, unit_diagonal=unit_diagonal)


# ----- tt.scipy.stats at the edges (issue 30): per distribution, the closed ends of its support, the
# points outside it, infinite values and degenerate or invalid parameters, as (method, arguments of
# SciPy's call). tests/scipy/test_stats.py compares every row with SciPy's value and requires a
# row for each distribution tt.scipy.stats exports.
_INF = np.inf
STATS_EDGES = {
    "norm": [(m, (x, 0.0, s)) for m in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
             for x in (-_INF, 0.0, _INF, np.nan) for s in (1.0, 0.0, -1.0)],
    "t": [(m, (x, df, 0.0, 1.0)) for m in ("logpdf", "pdf", "cdf")
          for x in (-_INF, 0.0, 2.0, _INF) for df in (0.5, 1.0, _INF, 0.0, -1.0)],
    "gamma": [(m, (x, a, 0.0, 1.0)) for m in ("logpdf", "pdf", "cdf", "sf")
              for x in (-1.0, 0.0, _INF) for a in (0.5, 1.0, 2.0, 0.0)] + [
        ("logpdf", (1.0, 1.0, 1.0, 2.0)), ("pdf", (0.0, 1.0, 0.0, 0.0))],
    "chi2": [(m, (x, df)) for m in ("logpdf", "pdf", "cdf", "sf") for x in (-1.0, 0.0, _INF)
             for df in (1.0, 2.0, 3.0, 0.0)],
    "beta": [(m, (x, a, b)) for m in ("logpdf", "pdf", "cdf") for x in (-0.1, 0.0, 1.0, 1.1)
             for a in (0.5, 1.0, 2.0) for b in (0.5, 1.0, 2.0)] + [
        (m, (0.5, a, b)) for m in ("logpdf", "cdf") for a, b in ((0.0, 1.0), (1.0, -1.0))] + [
        ("logpdf", (2.0, 1.0, 2.0, 2.0, 1.0))],
    "poisson": [(m, (k, mu)) for m in ("logpmf", "pmf", "cdf", "sf") for k in (-1.0, 0.0, 1.0, 2.5)
                for mu in (0.0, 2.0, -1.0)],
    "bernoulli": [(m, (k, p)) for m in ("logpmf", "pmf", "cdf") for k in (-1.0, 0.0, 1.0, 0.5)
                  for p in (0.0, 1.0, 0.3, -0.1, 1.5)],
    "binom": [(m, (k, n, p)) for m in ("logpmf", "pmf", "cdf") for k in (-1.0, 0.0, 3.0, 4.0)
              for n in (0.0, 3.0, 2.5) for p in (0.0, 1.0, 0.4, 1.5)],
    "multivariate_normal": [("logpdf", ([1.0, 1.0], [0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]])),
                            ("logpdf", ([_INF, 0.0], [0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]]))],
    "dirichlet": [("logpdf", ([0.0, 0.3, 0.7], [1.0, 2.0, 3.0])), ("logpdf", ([0.2, 0.8], [2.0, 1.0]))],
}


def rows(table):
    """(primitive rows, composite rows, {row: why it runs on the host only}), built with the
    OpSpec class and samplers of `table` (tinytensor.specs, which calls this: the import goes one
    way, from the engine's table up to tt.scipy)."""
    OpSpec, distinct, matrices = table.OpSpec, table.distinct, table.matrices
    normal, positive, with_zeros = table.normal, table.positive, table.with_zeros
    _positive_definite = table._positive_definite

    def unary(ufunc, sample=normal):
        """A row calling the SciPy ufunc itself: forward against SciPy on the arrays."""
        return OpSpec(ufunc, ufunc, SMALL_UNARY, sample=sample)

    def ordered(ufunc, order, values, sample=normal):
        """A row for ufunc(order, x): the order a static parameter, the reference SciPy's."""
        call = lambda x, **p: ufunc(p[order], x)   # noqa: E731
        return OpSpec(call, call, SMALL_UNARY, params=[{order: v} for v in values], sample=sample)

    primitives = {
        "gammaln": unary(sp.gammaln, positive),
        "digamma": unary(sp.digamma, positive),
        "polygamma": OpSpec(lambda x, n: special.polygamma(n, x), lambda x, n: sp.polygamma(n, x),
                            SMALL_UNARY, params=[dict(n=1), dict(n=2)], sample=positive),
        "gamma": unary(sp.gamma, positive),
        "rgamma": unary(sp.rgamma, positive),
        "beta": OpSpec(sp.beta, sp.beta, SMALL_BINARY, sample=positive),
        "betaln": OpSpec(sp.betaln, sp.betaln, SMALL_BINARY, sample=positive),
        "betainc": OpSpec(lambda x, a, b: sp.betainc(a, b, x), lambda x, a, b: sp.betainc(a, b, x),
                          SMALL_UNARY, params=[dict(a=2.0, b=3.0), dict(a=0.7, b=1.5)], sample=UNIT),
        "gammainc": ordered(sp.gammainc, "a", [2.5, 0.8], sample=positive),
        "gammaincc": ordered(sp.gammaincc, "a", [2.5], sample=positive),
        "erfc": unary(sp.erfc),
        "erfinv": unary(sp.erfinv, interval(-0.9, 0.9)),
        "erfcinv": unary(sp.erfcinv, interval(0.1, 1.9)),
        "ndtr": unary(sp.ndtr),
        "log_ndtr": unary(sp.log_ndtr, interval(-6.0, 3.0)),
        "ndtri": unary(sp.ndtri, UNIT),
        "logit": unary(sp.logit, UNIT),
        "xlogy": OpSpec(sp.xlogy, sp.xlogy, SMALL_BINARY, sample=(normal, positive)),
        "xlog1py": OpSpec(sp.xlog1py, sp.xlog1py, SMALL_BINARY, sample=(normal, positive)),
        "entr": unary(sp.entr, positive),
        "i0": unary(sp.i0),
        "i1": unary(sp.i1),
        "i0e": unary(sp.i0e, interval(0.3, 2.0)),
        "i1e": unary(sp.i1e, interval(-2.0, -0.3)),
        "iv": ordered(sp.iv, "v", [0.0, 1.5], sample=positive),
        "ive": ordered(sp.ive, "v", [1.0], sample=interval(0.3, 2.0)),
        "j0": unary(sp.j0),
        "j1": unary(sp.j1),
        "jv": ordered(sp.jv, "v", [2.0, 0.5], sample=positive),
        "y0": unary(sp.y0, positive),
        "y1": unary(sp.y1, positive),
        "yn": ordered(sp.yn, "v", [0, 3], sample=positive),
        "logsumexp_b": OpSpec(ops_core._logsumexp_b, lambda a, b, signed, **p: sp.logsumexp(a, b=b, **p),
                              None, sample=(normal, positive), pairs=LSE_B),
    }
    # ----- tt.scipy.linalg -----
    spd = matrices(_positive_definite)
    primitives.update({
        "solve_triangular": OpSpec(linalg._solve_triangular, _solve_triangular_reference, None,
                                   sample=(matrices(_triangular), normal), pairs=[
            (((3, 3), (3,)), dict(lower=True, unit_diagonal=False)),
            (((3, 3), (3, 2)), dict(lower=False, unit_diagonal=False)),
            (((3, 3), (3, 2)), dict(lower=True, unit_diagonal=True))]),
        "expm": OpSpec(linalg.expm, scipy.linalg.expm, [((3, 3),), ((2, 2, 2),)], sample=_small),
        "solve_sylvester": OpSpec(linalg.solve_sylvester, scipy.linalg.solve_sylvester,
                                  [((3, 3), (2, 2), (3, 2))], sample=(spd, spd, normal)),
        "sqrtm": OpSpec(linalg.sqrtm, lambda a: scipy.linalg.sqrtm(a).real, [((3, 3),)], sample=spd),
    })
    composites_linalg = {
        "scipy.linalg.solve_triangular(trans=1)": OpSpec(
            lambda a, b: linalg.solve_triangular(a, b, trans=1, lower=True),
            lambda a, b: scipy.linalg.solve_triangular(a, b, trans=1, lower=True), [((3, 3), (3, 2))],
            sample=(matrices(_triangular), normal)),
        "cho_factor/cho_solve": OpSpec(
            lambda a, b, lower: linalg.cho_solve(linalg.cho_factor(a, lower=lower), b),
            lambda a, b, lower: scipy.linalg.cho_solve(scipy.linalg.cho_factor(a, lower=lower), b), None,
            sample=(spd, normal),
            pairs=[(((3, 3), (3,)), dict(lower=False)), (((3, 3), (3, 2)), dict(lower=True))]),
        "scipy.linalg.cholesky": OpSpec(linalg.cholesky, scipy.linalg.cholesky, [((3, 3),)],
                                        params=[{}, dict(lower=True)], sample=spd),
    }

    # ----- tt.scipy.signal and NumPy's scientific functions -----
    primitives.update({
        "convolve_full": OpSpec(ops_science._convolve_full, lambda a, b: scipy.signal.convolve(a, b),
                                [((4,), (3,)), ((3, 4), (2, 2)), ((2,), (5,))]),
        "convolve_valid": OpSpec(ops_science._convolve_valid,
                                 lambda x, k: scipy.signal.convolve(x, k, "valid"),
                                 [((5,), (3,)), ((4, 4), (2, 3))]),
        "cumprod": OpSpec(ops_science._cumprod, np.cumprod, None, pairs=[
            (((3, 4),), dict(axis=1)), (((5,),), dict(axis=0)), (((2, 3, 4),), dict(axis=-2))]),
    })
    conv_modes = [(((5,), (3,)), dict(mode=m)) for m in ("full", "same", "valid")] + [
        (((3,), (5,)), dict(mode=m)) for m in ("same", "valid")]
    quantile_cases = [(((7,),), dict(q=0.3)), (((2, 3, 4),), dict(q=0.25, axis=(0, 2), keepdims=True))]
    quantiles_cases = [(((3, 5),), dict(q=np.array([0.1, 0.5, 0.8]), axis=1))] + [
        (((6,),), dict(q=np.array([0.2, 0.7]), method=m)) for m in ("lower", "higher", "midpoint", "nearest")]
    composites = {
        **composites_linalg,
        "np.sort": OpSpec(np.sort, np.sort, None, sample=distinct, pairs=[
            (((5,),), dict(axis=-1)), (((3, 4),), dict(axis=0)), (((2, 3),), dict(axis=None))]),
        "np.quantile": OpSpec(np.quantile, np.quantile, None, sample=distinct, pairs=quantile_cases),
        "np.quantile(q array, methods)": OpSpec(np.quantile, np.quantile, None, sample=distinct,
                                                pairs=quantiles_cases),
        "np.median": OpSpec(np.median, np.median, None, sample=distinct, pairs=[
            (((5,),), {}), (((3, 4),), dict(axis=1, keepdims=True)), (((4,),), {})]),
        "np.percentile": OpSpec(np.percentile, np.percentile, None, sample=distinct,
                                pairs=[(((6,),), dict(q=[10.0, 75.0]))]),
        "cumprod(zeros, axis=None)": OpSpec(np.cumprod, np.cumprod, None, sample=with_zeros,
                                            pairs=[(((3, 4),), dict(axis=None)), (((2, 5),), dict(axis=1))]),
        "np.interp(x, xp, fp)": OpSpec(lambda x, fp: np.interp(x, XP, fp), lambda x, fp: np.interp(x, XP, fp),
                                       [((5,), (4,)), ((2, 3), (4,))], sample=(between_knots, normal)),
        "np.append": OpSpec(np.append, np.append, None, pairs=[
            (((2, 3), (2,)), dict(axis=None)), (((2, 3), (1, 3)), dict(axis=0))]),
        "np.polyval": OpSpec(np.polyval, np.polyval, [((4,), (3,)), ((3,), ())]),
        "np.trapezoid": OpSpec(np.trapezoid, np.trapezoid, None, pairs=[
            (((5,),), {}), (((3, 4),), dict(dx=0.5, axis=0))]),
        "np.trapezoid(y, x)": OpSpec(lambda y, x: np.trapezoid(y, x), lambda y, x: np.trapezoid(y, x),
                                     [((5,), (5,)), ((2, 5), (5,))]),
        "np.gradient": OpSpec(lambda f, **p: _gradients(f, **p), _gradients, None, pairs=[
            (((5,),), {}), (((4, 5),), dict(edge_order=2)), (((3, 4),), dict(axis=-1))]),
        "np.gradient(coordinates)": OpSpec(lambda f: _gradients(f, COORDS, axis=-1),
                                           lambda f: _gradients(f, COORDS, axis=-1), [((5,),), ((2, 5),)]),
        "np.heaviside(x2)": OpSpec(lambda x2: np.heaviside(X1.astype(x2.dtype), x2),
                                   lambda x2: np.heaviside(X1, x2),
                                   [((),), ((5,),)]),
        "np.convolve": OpSpec(np.convolve, np.convolve, None, pairs=conv_modes),
        "np.correlate": OpSpec(np.correlate, np.correlate, None, pairs=conv_modes),
        "signal.convolve": OpSpec(signal.convolve, scipy.signal.convolve, None, pairs=[
            (((4, 5), (2, 3)), dict(mode=m)) for m in ("full", "same", "valid")] + [
            (((2, 3), (4, 5)), dict(mode="valid"))]),
        "signal.correlate": OpSpec(signal.correlate, scipy.signal.correlate, None, pairs=[
            (((4, 5), (2, 3)), dict(mode=m)) for m in ("full", "same", "valid")] + [
            (((2, 3), (4, 5)), dict(mode="valid"))]),

        "multigammaln": OpSpec(special.multigammaln, sp.multigammaln, [((),), ((3,),)],
                               params=[dict(d=3)], sample=interval(1.5, 3.0)),
        "logsumexp(b=)": OpSpec(_lse, _lse_reference, None, sample=(normal, positive), pairs=[
            (((3, 4), (3, 4)), dict(axis=1)), (((3, 4), (4,)), dict(axis=None)),
            (((2, 3), (2, 1)), dict(axis=0, keepdims=True))]),
        "logsumexp(return_sign)": OpSpec(_lse_signed, _lse_signed_reference, None, sample=(normal, normal),
                                         pairs=[(((3, 4), (3, 4)), dict(axis=1))]),
        "scipy softmax(axis=None)": OpSpec(special.softmax, sp.softmax, [((2, 3),)]),
        "scipy log_softmax(axis=None)": OpSpec(special.log_softmax, sp.log_softmax, [((2, 3),)]),
    }
    host_only = {name: SCIPY_ONLY for name in primitives if name != "logsumexp_b"}
    host_only.update({"multigammaln": SCIPY_ONLY, "logsumexp(return_sign)": SCIPY_ONLY})
    host_only.update({name: SCIPY_ONLY for name in (
        "cho_factor/cho_solve", "scipy.linalg.solve_triangular(trans=1)", "signal.convolve",
        "signal.correlate", "np.convolve", "np.correlate")})
    host_only.update({name: HOST_CONSTANTS for name in (
        "cumprod(zeros, axis=None)", "np.gradient", "np.gradient(coordinates)", "np.heaviside(x2)",
        "np.interp(x, xp, fp)", "np.quantile(q array, methods)", "np.percentile")})
    return primitives, composites, host_only
