"""Round 41c: tt.compile with the rest of the framework: tt.vmap inside and around compiled functions
(in_axes/out_axes, pytrees, batch sizes 0, 1 and changing), every transform in every order with tt.compile
over closed-over Tensors updated in place, tt.scipy (special functions and stats distributions at and beyond
their support edges, linalg, odeint with closures, args, a stiff system, options), user primitives
(defvjp/defjvp, rules swapped, globals read by the forward and the rules, defbatch), grad-mode contexts,
tt.data.minibatches, and compile's options (check=, fuse=, cache_size=, disable(), the recompile limit).

559 cases: 541 pass, 18 strict xfails, 2 classes:
- signed zeros through a user primitive's VJP mapped over cotangents with zero entries on the loop fallback
  (tt.jacobian, tt.hessian, tt.vmap of its pullback, vmap(grad)): the zero entries are +0.0 eagerly and -0.0
  compiled; with a defbatch rule both give -0.0 (15).
- tt.data.minibatches(rng=None) over held arrays inside f, where a helper f calls names tt.grad (even in code
  that never runs): no refusal, the recording's permutation is replayed on every call, so batches and the
  global generator's state differ from call 1 (without that name the same code is refused) (3).
Since fixed: both classes (pieces of one cotangent written into one array are added to 0.0, as
eagerly; the global generator is always watched, so the minibatches case is refused, naming the fix).
Refusals observed and accepted: a second derivative of odeint inside (tt.hessian), solve_ivp inside, a
primitive's forward appending to a list, tt.set_grad_enabled(False) left changed by f, minibatches drawing
from an np.random.Generator or from the global generator (a draw past tinytensor), minibatches over arguments,
a pullback returned from f.
"""
# ruff: noqa: E501

import struct
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.scipy import integrate, linalg, special, stats

N = 12
LONG = 42


def _canon(v):
    if isinstance(v, tt.Tensor):
        return ("T", _canon(v.numpy()), v.requires_grad)
    if isinstance(v, np.ndarray):
        return ("A", v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes())
    if isinstance(v, np.generic):
        return ("S", v.dtype.str, v.tobytes())
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return ("F", struct.pack("<d", v))
    if isinstance(v, dict):
        return {k: _canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_canon(x) for x in v]
    return repr(v)


def _run(build, compiled, n):
    call, snap = build(compiled)
    out = []
    for i in range(n):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = ("ok", _canon(call(i)))
        except RuntimeError as e:
            if compiled and "tt.compile" in str(e):
                return out, ("refused", str(e)[:300])
            r = ("err", type(e).__name__)
        except Exception as e:  # noqa: BLE001
            r = ("err", type(e).__name__)
        out.append((r, snap()))
    return out, None


def _check(build, expect, n=N):
    e1, _ = _run(build, False, n)
    e2, _ = _run(build, False, n)
    assert e1 == e2, "eager not deterministic"
    c, refused = _run(build, True, n)
    if expect == "refused":
        assert refused is not None, "expected a refusal"
        return
    assert refused is None, refused
    for i, (a, b) in enumerate(zip(e1, c)):
        assert a == b, f"call {i} differs"
    assert len(c) == len(e1)


def _r(i, *shape, seed=0):
    return np.random.default_rng(1000 * seed + i).standard_normal(shape)


def _c(f, compiled, **kw):
    return tt.compile(f, **kw) if compiled else f


def _chg(i):
    """The 42-call cases change something at the 3rd, 10th and 40th call."""
    return i in (2, 9, 39)


CASES = []


R_PRIM_JAC = ("signed zeros: a user primitive's VJP mapped over cotangents with zero entries (tt.jacobian, "
              "tt.hessian, tt.vmap of its pullback, vmap(grad)) on the loop fallback: +0.0 eagerly, -0.0 compiled")
XF = {f"prim-{k}-{u}": R_PRIM_JAC for k in ["cube", "global_fwd", "two", "vjp_global", "rule_swap"]
      for u in ["hessian", "jacobian"]}
R_MB_FROZEN = ("tt.data.minibatches(rng=None) over held arrays inside f, whose helper names tt.grad: no refusal, "
               "the recording's permutation is replayed on every call (batches and the global generator's state "
               "differ from call 1)")
XF.update({"data-held_global": R_MB_FROZEN, "data_long-held_global": R_MB_FROZEN,
           "data-held_global_unrun_grad": R_MB_FROZEN})


# Since fixed: the global generator is always watched (and a generator met again nearer f is looked
# into again), so these are refused, naming the fix, as without tt.grad in the helper.
NOW_REFUSED = {R_MB_FROZEN}
# Since fixed: pieces of one cotangent written into one array are added to 0.0, as eagerly.
FIXED = {R_PRIM_JAC}


def case(name, n=N, expect="equal", xfail=None):
    xfail = xfail or XF.get(name)
    if xfail in NOW_REFUSED:
        expect, xfail = "refused", None
    if xfail in FIXED:
        xfail = None

    def deco(build):
        marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
        CASES.append(pytest.param(build, expect, n, id=name, marks=marks))
        return build
    return deco


# ---------- 1: vmap inside a compiled function ----------

VFUNS = {
    "tanh_mm": lambda W: (lambda v: tt.tanh(v @ W)),
    "sum_sin": lambda W: (lambda v: tt.sum(tt.sin(v) * (v @ W).sum())),
    "softmax": lambda W: (lambda v: tt.softmax(v @ W)),
    "logsumexp": lambda W: (lambda v: tt.logsumexp(v @ W)),
    "relu_max": lambda W: (lambda v: tt.maximum(v @ W, 0.0)),
    "where": lambda W: (lambda v: tt.where(v @ W > 0, v @ W, -0.5 * (v @ W))),
    "norm": lambda W: (lambda v: (v @ W) / tt.sqrt(tt.sum((v @ W) ** 2) + 1e-6)),
    "outer": lambda W: (lambda v: tt.outer(v, v) @ W),
}


def b_vmap_inside(fname, in_axes, out_axes, batch_changes):
    def build(compiled):
        W = tt.tensor(_r(0, 3, 4, seed=1))
        g = VFUNS[fname](W)

        def f(X):
            return tt.vmap(g, in_axes=in_axes, out_axes=out_axes)(X)
        h = _c(f, compiled)

        def call(i):
            if i % 4 == 3:
                W.data *= 0.9
            B = (5 + (i % 3)) if batch_changes else 5
            X = _r(i, B, 3)
            if in_axes == 1:
                X = X.T.copy()
            return h(X)
        return call, lambda: _canon(W)
    return build


for fname in VFUNS:
    for ia, oa, bc in [(0, 0, False), (0, 1, True), (1, 0, True), (0, -1, False)]:
        case(f"vmap_inside-{fname}-in{ia}-out{oa}-b{bc}")(b_vmap_inside(fname, ia, oa, bc))


def b_vmap_of_compiled(fname, where):
    def build(compiled):
        W = tt.tensor(_r(0, 3, 4, seed=2))
        g = VFUNS[fname](W)
        if where == "vmap_of_compiled":
            h = tt.vmap(_c(g, compiled))
        else:  # compiled vmap
            h = _c(tt.vmap(g), compiled)

        def call(i):
            if i % 5 == 4:
                W.data[0] += 0.25
            return h(_r(i, 4 + (i % 2), 3))
        return call, lambda: _canon(W)
    return build


for fname in VFUNS:
    for where in ("vmap_of_compiled", "compiled_vmap"):
        case(f"{where}-{fname}")(b_vmap_of_compiled(fname, where))


def b_vmap_pytree(kind):
    def build(compiled):
        p = {"W": _r(0, 3, 2, seed=3), "s": np.arange(5.0)}

        def f(p, X):
            if kind == "dict_axes":
                return tt.vmap(lambda q, x: q["s"] * tt.tanh(x @ q["W"]), in_axes=({"W": None, "s": 0}, 0))(p, X)
            if kind == "none_axis":
                return tt.vmap(lambda W, x: tt.tanh(x @ W), in_axes=(None, 0))(p["W"], X)
            if kind == "nested":
                return tt.vmap(tt.vmap(lambda s, t: s * t, (None, 0)), (0, None))(X[:, 0], p["s"])
            if kind == "out_none":
                return tt.vmap(lambda x: tt.sum(p["W"]), out_axes=None, axis_size=5)(X)
            if kind == "kw":
                return tt.vmap(lambda x, W=None: x @ W, in_axes=(0,))(X, W=np.stack([p["W"]] * 5))
            if kind == "grad":
                return tt.vmap(tt.grad(lambda W, x: tt.sum(tt.tanh(x @ W))), in_axes=(None, 0))(p["W"], X)
            if kind == "jac":
                return tt.vmap(tt.jacobian(lambda x: tt.tanh(x @ p["W"])))(X)
            if kind == "hess":
                return tt.vmap(tt.hessian(lambda v: tt.sum(tt.sin(v) ** 2)))(X)
            if kind == "hvp":
                return tt.vmap(lambda v: tt.hvp(lambda u: tt.sum(u ** 3), (v,), (np.ones(3),)))(X)
            if kind == "jvp":
                return tt.vmap(lambda v, t: tt.jvp(lambda u: tt.tanh(u @ p["W"]), (v,), (t,)))(X, X * 0.5)
            if kind == "vjp":
                return tt.vmap(lambda v, c: tt.vjp(lambda u: tt.tanh(u @ p["W"]), v)[1](c)[0])(X, np.ones((5, 2)))
            if kind == "jacfwd":
                return tt.vmap(tt.jacobian(lambda x: tt.sin(x @ p["W"]), mode="fwd"))(X)
            raise ValueError(kind)
        h = _c(f, compiled)

        def call(i):
            if i % 3 == 2:
                p["W"] = p["W"] * 1.1
            return h(p, _r(i, 5, 3))
        return call, lambda: None
    return build


for kind in ["dict_axes", "none_axis", "nested", "out_none", "kw", "grad", "jac", "hess", "hvp", "jvp",
             "vjp", "jacfwd"]:
    case(f"vmap_pytree-{kind}")(b_vmap_pytree(kind))


# ---------- 2: transforms and compile, in every order, over closures updated in place ----------

LOSSES = {
    "tanh_sq": lambda a, x: tt.sum(tt.tanh(x * a) ** 2),
    "exp_log": lambda a, x: tt.sum(tt.log1p(tt.exp(x * a))),
    "sincos": lambda a, x: tt.sum(tt.sin(x) * tt.cos(a * x) + x ** 3),
    "abs_max": lambda a, x: tt.sum(tt.abs(x - a) + tt.maximum(x, a)),
    "softplus": lambda a, x: tt.sum(tt.softplus(a * x)) + tt.mean(x ** 2),
    "matmul": lambda a, x: tt.sum(tt.tanh(tt.outer(x, x) @ (x * a))),
}

ORDERS = ["c(grad)", "grad(c)", "c(vag)", "vag(c)", "c(jac)", "jac(c)", "c(hess)", "hess(c)",
          "c(jvp)", "jvp(c)", "c(vjp)", "c(hvp)", "hvp(c)", "c(grad(grad))", "grad(c(grad))",
          "c(jacfwd)", "body_grad", "body_vag_update"]


def b_order(lname, order, n):
    def build(compiled):
        a = tt.tensor(np.array([0.7, -0.3, 1.1]))
        L = LOSSES[lname]

        def f(x):
            return L(a, x)

        def C(fn):
            return _c(fn, compiled)
        s0 = lambda x: tt.sum(L(a, x) * 1.0)  # noqa: E731
        if order == "c(grad)":
            h = C(tt.grad(f))
        elif order == "grad(c)":
            h = tt.grad(C(f))
        elif order == "c(vag)":
            h = C(tt.value_and_grad(f))
        elif order == "vag(c)":
            h = tt.value_and_grad(C(f))
        elif order == "c(jac)":
            h = C(tt.jacobian(lambda x: tt.tanh(x * a) * x))
        elif order == "jac(c)":
            h = tt.jacobian(C(lambda x: tt.tanh(x * a) * x))
        elif order == "c(hess)":
            h = C(tt.hessian(s0))
        elif order == "hess(c)":
            h = tt.hessian(C(s0))
        elif order == "c(jvp)":
            h = C(lambda x: tt.jvp(f, (x,), (x * 0 + 1.0,)))
        elif order == "jvp(c)":
            g = C(f)
            h = lambda x: tt.jvp(g, (x,), (np.ones_like(x),))  # noqa: E731
        elif order == "c(vjp)":
            h = C(lambda x: tt.vjp(lambda u: tt.sin(u * a) * u, x)[1](x + 1.0)[0])
        elif order == "c(hvp)":
            h = C(lambda x: tt.hvp(s0, (x,), (np.ones(3),)))
        elif order == "hvp(c)":
            g = C(s0)
            h = lambda x: tt.hvp(g, (x,), (np.ones(3),))  # noqa: E731
        elif order == "c(grad(grad))":
            h = C(tt.grad(lambda x: tt.sum(tt.grad(f)(x) ** 2)))
        elif order == "grad(c(grad))":
            gg = C(tt.grad(f))
            h = tt.grad(lambda x: tt.sum(gg(x) ** 2))
        elif order == "c(jacfwd)":
            h = C(tt.jacobian(lambda x: tt.sin(x * a) * x, mode="fwd"))
        elif order == "body_grad":
            def body(x):
                g = tt.grad(f)(x)
                return x - 0.1 * g, tt.sum(g)
            h = C(body)
        elif order == "body_vag_update":
            def body(x):
                v, g = tt.value_and_grad(lambda u: L(a, u))(x)
                with tt.no_grad():
                    a.mul_(0.99)
                return v, g
            h = C(body)

        def call(i):
            if order != "body_vag_update" and i % 3 == 1:
                a.data += 0.05
            if n == LONG and _chg(i):
                a.data = a.data.astype(np.float32) if i == 9 else a.data.astype(np.float64) * 1.5
            x = _r(i, 3)
            if n == LONG and i >= 9 and i < 39:
                x = x.astype(np.float32)
            return h(x)
        return call, lambda: _canon(a)
    return build


for lname in LOSSES:
    for order in ORDERS:
        case(f"order-{lname}-{order}")(b_order(lname, order, N))
for order in ORDERS:
    case(f"order_long-tanh_sq-{order}", n=LONG)(b_order("tanh_sq", order, LONG))


# ---------- 3: tt.scipy inside compiled functions ----------

EDGE = np.array([0.0, -0.0, 1e-300, 0.5, 1.0, 2.0, -1.0, np.inf, -np.inf, np.nan, 1e308, -2.0])

SPECIAL = {
    "gammaln": lambda x: special.gammaln(x),
    "digamma": lambda x: special.digamma(x),
    "erf": lambda x: special.erf(x),
    "erfinv": lambda x: special.erfinv(x),
    "erfcinv": lambda x: special.erfcinv(x),
    "ndtri": lambda x: special.ndtri(x),
    "log_ndtr": lambda x: special.log_ndtr(x),
    "expit": lambda x: special.expit(x),
    "logit": lambda x: special.logit(x),
    "xlogy": lambda x: special.xlogy(x, x + 1.0),
    "xlog1py": lambda x: special.xlog1py(x, x),
    "entr": lambda x: special.entr(x),
    "i0e": lambda x: special.i0e(x),
    "i1": lambda x: special.i1(x),
    "j0": lambda x: special.j0(x),
    "y1": lambda x: special.y1(x),
    "polygamma": lambda x: special.polygamma(1, x),
    "gammainc": lambda x: special.gammainc(2.0, x),
    "betainc": lambda x: special.betainc(2.0, 3.0, x),
    "multigammaln": lambda x: special.multigammaln(x + 3.0, 2),
    "softplus": lambda x: special.softplus(x),
    "logsumexp_b": lambda x: special.logsumexp(x, b=np.linspace(-1, 1, x.shape[-1])),
    "logsumexp_sign": lambda x: special.logsumexp(x, b=np.linspace(-1, 1, x.shape[-1]), return_sign=True),
    "rgamma": lambda x: special.rgamma(x),
    "gammasgn": lambda x: special.gammasgn(x) * x,
}


def b_special(fname, mode):
    def build(compiled):
        fn = SPECIAL[fname]
        if mode == "value":
            f = fn
        else:
            def f(x):
                return tt.grad(lambda u: tt.sum(tt.where(tt.isfinite(fn(u) if not isinstance(fn(u), tuple)
                                                                     else fn(u)[0]), 1.0, 0.0)
                                                * 0 + (fn(u) if not isinstance(fn(u), tuple) else fn(u)[0])))(x)
        h = _c(f, compiled)

        def call(i):
            if mode == "value":
                x = EDGE * (1.0 + 0.1 * (i % 3))
                if i % 4 == 3:
                    x = np.abs(x)
            else:
                x = np.abs(_r(i, 6)) * 0.4 + 0.05
            return h(x)
        return call, lambda: None
    return build


for fname in SPECIAL:
    case(f"special-{fname}-value")(b_special(fname, "value"))
for fname in ["gammaln", "digamma", "erf", "erfinv", "ndtri", "log_ndtr", "logit", "xlogy", "entr", "i0e",
              "polygamma", "gammainc", "betainc", "softplus", "logsumexp_b"]:
    case(f"special-{fname}-grad")(b_special(fname, "grad"))


DISTS = {
    "norm_logpdf": lambda x, s: stats.norm.logpdf(x, 0.1, s),
    "norm_cdf": lambda x, s: stats.norm.cdf(x, 0.0, s),
    "norm_logsf": lambda x, s: stats.norm.logsf(x, 0.0, s),
    "norm_ppf": lambda x, s: stats.norm.ppf(x, 0.0, s),
    "norm_isf": lambda x, s: stats.norm.isf(x, 0.0, s),
    "t_logpdf": lambda x, s: stats.t.logpdf(x, 3.0, 0.0, s),
    "t_cdf": lambda x, s: stats.t.cdf(x, 3.0, 0.0, s),
    "t_dfinf": lambda x, s: stats.t.logpdf(x, np.inf, 0.0, s),
    "gamma_logpdf": lambda x, s: stats.gamma.logpdf(x, 2.0, 0.0, s),
    "gamma_a1": lambda x, s: stats.gamma.logpdf(x, 1.0, scale=s),
    "gamma_cdf": lambda x, s: stats.gamma.cdf(x, 2.0, scale=s),
    "beta_logpdf": lambda x, s: stats.beta.logpdf(x, 1.0, 2.0),
    "beta_pdf_half": lambda x, s: stats.beta.pdf(x, 0.5, 2.0),
    "beta_logcdf": lambda x, s: stats.beta.logcdf(x, 2.0, 3.0),
    "chi2_logpdf": lambda x, s: stats.chi2.logpdf(x, 2.0, scale=s),
    "chi2_sf": lambda x, s: stats.chi2.sf(x, 3.0),
    "poisson_logpmf": lambda x, s: stats.poisson.logpmf(np.floor(np.abs(x)), s),
    "bernoulli_pmf": lambda x, s: stats.bernoulli.pmf(np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.0] * 2), s / 3.0),
    "binom_logcdf": lambda x, s: stats.binom.logcdf(np.arange(12.0) % 5, 4, s / 3.0),
}


def b_dist(dname, mode, scale_kind):
    def build(compiled):
        fn = DISTS[dname]
        if mode == "value":
            f = fn
        else:
            def f(x, s):
                return tt.grad(lambda ss: tt.sum(fn(x, ss)))(s)
        h = _c(f, compiled)

        def call(i):
            x = EDGE * (1.0 + 0.05 * (i % 2))
            if scale_kind == "changing":
                s = np.full(12, [1.0, 0.5, 0.0, -1.0, 2.0, 0.9][i % 6])
            else:
                s = 1.0 + 0.25 * (i % 4)
            if mode == "grad":
                x = np.linspace(0.05, 0.95, 12) * (1 + 0.01 * i)
                s = np.full(12, 0.5 + 0.1 * (i % 5)) if scale_kind == "changing" else 0.5 + 0.1 * (i % 5)
            return h(x, s)
        return call, lambda: None
    return build


for dname in DISTS:
    case(f"dist-{dname}-value-array")(b_dist(dname, "value", "changing"))
    case(f"dist-{dname}-value-float")(b_dist(dname, "value", "float"))
for dname in ["norm_logpdf", "norm_cdf", "t_logpdf", "gamma_logpdf", "chi2_logpdf", "poisson_logpmf",
              "bernoulli_pmf", "binom_logcdf", "norm_ppf"]:
    case(f"dist-{dname}-grad")(b_dist(dname, "grad", "changing"))


def b_mvn(kind):
    def build(compiled):
        def f(x, m, C):
            if kind == "logpdf":
                return stats.multivariate_normal.logpdf(x, m, C)
            if kind == "singular":
                return stats.multivariate_normal.logpdf(x, m, C, allow_singular=True)
            if kind == "entropy":
                return stats.multivariate_normal.entropy(m, C)
            if kind == "grad":
                return tt.grad(lambda CC: tt.sum(stats.multivariate_normal.logpdf(x, m, CC)))(C)
            if kind == "dirichlet":
                return stats.dirichlet.logpdf(np.abs(m) / np.abs(m).sum(), np.abs(x) + 0.5)
            raise ValueError(kind)
        h = _c(f, compiled)

        def call(i):
            A = _r(i, 3, 3)
            C = A @ A.T + np.eye(3) * (0.1 if i % 3 else 0.0)
            if kind == "singular" and i % 2:
                C = np.ones((3, 3))
            return h(_r(i, 3, seed=4), _r(i, 3, seed=5), C)
        return call, lambda: None
    return build


for kind in ["logpdf", "singular", "entropy", "grad", "dirichlet"]:
    case(f"mvn-{kind}")(b_mvn(kind))


LINALG = {
    "expm": lambda A: linalg.expm(A),
    "cholesky": lambda A: linalg.cholesky(A @ A.T + 3.0 * np.eye(3)),
    "cho_solve": lambda A: linalg.cho_solve(linalg.cho_factor(A @ A.T + 3.0 * np.eye(3)), np.ones(3)),
    "solve_tri": lambda A: linalg.solve_triangular(A + 4.0 * np.eye(3), np.arange(3.0), lower=True),
    "sqrtm": lambda A: linalg.sqrtm(A @ A.T + np.eye(3)),
    "sylvester": lambda A: linalg.solve_sylvester(A + 3 * np.eye(3), A.T + 3 * np.eye(3), np.ones((3, 3))),
    "banded": lambda A: linalg.solve_banded((1, 1), np.stack([A[0], A[1] + 4.0, A[2]]), np.ones(3)),
    "tt_inv": lambda A: tt.linalg.inv(A + 4.0 * np.eye(3)),
    "tt_det": lambda A: tt.linalg.det(A),
    "tt_slogdet": lambda A: tt.linalg.slogdet(A)[1],
    "tt_eigh": lambda A: tt.linalg.eigh(A + A.T)[0],
    "tt_svd": lambda A: tt.linalg.svd(A)[1],
    "tt_solve": lambda A: tt.linalg.solve(A + 4.0 * np.eye(3), np.ones(3)),
}


def b_linalg(lname, mode):
    def build(compiled):
        fn = LINALG[lname]
        if mode == "value":
            f = fn
        elif mode == "grad":
            f = tt.grad(lambda A: tt.sum(fn(A) ** 2))
        else:
            f = lambda A: tt.vmap(fn)(np.stack([A, A * 0.5]))  # noqa: E731
        h = _c(f, compiled)
        return (lambda i: h(_r(i, 3, 3) * 0.5)), (lambda: None)
    return build


for lname in LINALG:
    for mode in ("value", "grad", "vmap"):
        case(f"linalg-{lname}-{mode}")(b_linalg(lname, mode))


def b_odeint(kind, n):
    def build(compiled):
        k = tt.tensor(np.array([0.5, 1.5]))
        theta = {"v": np.array([1.0, 0.1, 1.5, 0.075])}
        times = np.linspace(0.0, 0.5, 3)
        opts = {"rtol": 1e-6, "atol": 1e-6}

        def lv(y, t, th):
            return tt.stack([th[0] * y[0] - th[1] * y[0] * y[1], -th[2] * y[1] + th[3] * y[0] * y[1]])

        def closure_rhs(y, t):
            return -k * y

        def stiff(y, t, kk):
            return tt.stack([-kk[0] * y[0] + kk[1] * y[1], -kk[2] * y[1]])

        def f(y0, th):
            if kind == "closure":
                return integrate.odeint(closure_rhs, y0[:2], times, **opts)
            if kind == "closure_grad":
                return tt.grad(lambda yy: tt.sum(integrate.odeint(closure_rhs, yy, times, **opts)))(y0[:2])
            if kind == "args":
                return integrate.odeint(lv, y0, times, args=(th,), **opts)
            if kind == "args_vag":
                return tt.value_and_grad(lambda t_: tt.sum(integrate.odeint(lv, y0, times, args=(t_,), **opts) ** 2))(th)
            if kind == "jvp":
                return tt.jvp(lambda t_: integrate.odeint(lv, y0, times, args=(t_,), **opts), (th,), (np.ones(4),))
            if kind == "stiff":
                return integrate.odeint(stiff, y0, np.array([0.0, 0.2]), args=(th[:3] * np.array([200.0, 199.0, 1.0]),),
                                        **opts)
            if kind == "mxstep":
                return integrate.odeint(lv, y0, np.linspace(0, 50.0, 3), args=(th,), mxstep=5)
            if kind == "mxstep_grad":
                return tt.grad(lambda t_: tt.sum(integrate.odeint(lv, y0, np.linspace(0, 50.0, 3), args=(t_,),
                                                                mxstep=5)))(th)
            if kind == "options":
                return integrate.odeint(lv, y0, times, args=(th,), rtol=1e-6, atol=1e-9, h0=1e-3, hmax=0.1)
            if kind == "replay_false":
                return integrate.odeint(lv, y0, times, args=(th,), replay=False, **opts)
            if kind == "hessian":
                return tt.hessian(lambda q: tt.sum(integrate.odeint(lambda y, t, qq: -qq * y, np.array([1.0]),
                                                                   np.array([0.0, 2.0]), args=(q,))))(th[:1])
            if kind == "solve_ivp":
                return integrate.solve_ivp(lambda t, y, a: lv(y, t, a), (0.0, 1.0), y0, args=(th,), t_eval=times).y
            raise ValueError(kind)
        h = _c(f, compiled)

        def call(i):
            if i % 4 == 1:
                k.data *= 1.1
            if n == LONG and _chg(i):
                theta["v"] = theta["v"] * 1.05
            return h(np.array([10.0, 5.0]) * (1 + 0.01 * i), theta["v"] * (1 + 0.001 * (i % 3)))
        return call, lambda: _canon(k)
    return build


for kind in ["closure", "closure_grad", "args", "stiff", "mxstep", "mxstep_grad", "options",
             "replay_false"]:
    case(f"odeint-{kind}")(b_odeint(kind, N))
for kind in ["hessian", "solve_ivp"]:
    case(f"odeint-{kind}", expect="refused")(b_odeint(kind, N))
for kind in ["closure"]:
    case(f"odeint_long-{kind}", n=LONG)(b_odeint(kind, LONG))


# ---------- 4: user primitives ----------

CFG = {"scale": 2.0, "vjp_scale": 3.0}


def _make_prim(kind):
    @tt.primitive
    def p41c_cube(x):
        return x ** 3
    p41c_cube.defvjp(lambda g, ans, x: 3 * x ** 2 * g)
    p41c_cube.defjvp(lambda t, ans, x: 3 * x ** 2 * t)
    if kind == "cube":
        return p41c_cube

    @tt.primitive
    def p41c_scaled(x):
        return CFG["scale"] * np.sin(x)
    p41c_scaled.defvjp(lambda g, ans, x: CFG["scale"] * np.cos(x) * g)
    p41c_scaled.defjvp(lambda t, ans, x: CFG["scale"] * np.cos(x) * t)
    if kind == "global_fwd":
        return p41c_scaled

    @tt.primitive
    def p41c_two(x, y, power=2):
        return x ** power * y
    p41c_two.defvjp(lambda g, ans, x, y, power=2: power * x ** (power - 1) * y * g,
                    lambda g, ans, x, y, power=2: x ** power * g)
    p41c_two.defjvp(lambda t, ans, x, y, power=2: power * x ** (power - 1) * y * t,
                    lambda t, ans, x, y, power=2: x ** power * t)
    if kind == "two":
        return p41c_two

    @tt.primitive
    def p41c_vjpglobal(x):
        return np.tanh(x)
    p41c_vjpglobal.defvjp(lambda g, ans, x: CFG["vjp_scale"] * (1 - ans ** 2) * g)
    p41c_vjpglobal.defjvp(lambda t, ans, x: CFG["vjp_scale"] * (1 - ans ** 2) * t)
    if kind == "vjp_global":
        return p41c_vjpglobal

    @tt.primitive
    def p41c_tup(xs):
        return xs[0] * xs[1]
    p41c_tup.defvjp(lambda g, ans, xs: (g * xs[1], g * xs[0]))
    if kind == "tuple":
        return p41c_tup

    @tt.primitive
    def p41c_f32(x):
        return np.exp(x).astype(np.float32)
    p41c_f32.defvjp(lambda g, ans, x: g * ans)
    p41c_f32.defjvp(lambda t, ans, x: t * ans)
    if kind == "f32":
        return p41c_f32

    @tt.primitive
    def p41c_rule_swap(x):
        return x * x
    p41c_rule_swap.defvjp(lambda g, ans, x: 2 * x * g)
    p41c_rule_swap.defjvp(lambda t, ans, x: 2 * x * t)
    return p41c_rule_swap


PRIM_USES = ["value", "grad", "vag", "jvp", "hessian", "vmap", "vmap_grad", "jacobian", "backward"]


def b_prim(kind, use, n):
    def build(compiled):
        prim = _make_prim(kind)
        w = tt.tensor(np.array([0.3, -0.2, 0.9]), requires_grad=(use == "backward"))
        CFG.update(scale=2.0, vjp_scale=3.0)

        def P(x):
            if kind == "two":
                return prim(x, w, power=3)
            if kind == "tuple":
                return prim((x, w))
            return prim(x * 1.0) * w if kind != "f32" else prim(x) * 2.0

        def f(x):
            if use == "value":
                return P(x)
            if use == "grad":
                return tt.grad(lambda u: tt.sum(P(u)))(x)
            if use == "vag":
                return tt.value_and_grad(lambda u: tt.sum(P(u) ** 2))(x)
            if use == "jvp":
                return tt.jvp(P, (x,), (np.ones(3),))
            if use == "hessian":
                return tt.hessian(lambda u: tt.sum(P(u)))(x)
            if use == "vmap":
                return tt.vmap(P)(tt.stack([x, x * 2.0]))
            if use == "vmap_grad":
                return tt.vmap(tt.grad(lambda u: tt.sum(P(u))))(tt.stack([x, x * 2.0]))
            if use == "jacobian":
                return tt.jacobian(P)(x)
            if use == "backward":
                return tt.sum(P(x))
            raise ValueError(use)
        h = _c(f, compiled)

        def call(i):
            if kind == "global_fwd" and i % 4 == 3:
                CFG["scale"] += 0.5
            if kind == "vjp_global" and i % 4 == 3:
                CFG["vjp_scale"] += 1.0
            if kind == "rule_swap" and (i == 3 or (n == LONG and _chg(i))):
                prim.defvjp(lambda g, ans, x, k=i: (2 + k) * x * g)
                prim.defjvp(lambda t, ans, x, k=i: (2 + k) * x * t)
            w.data *= 1.01
            out = h(_r(i, 3) * 0.5)
            if use == "backward":
                out.backward()
                g = w.grad.copy()
                w.grad = None
                return out, g
            return out
        return call, lambda: _canon(w.data)
    return build


for kind in ["cube", "global_fwd", "two", "vjp_global", "tuple", "f32", "rule_swap"]:
    for use in PRIM_USES:
        if kind == "tuple" and use in ("jvp", "hessian", "jacobian", "vmap_grad"):
            continue
        case(f"prim-{kind}-{use}")(b_prim(kind, use, N))
case("prim_long-rule_swap-grad", n=LONG)(b_prim("rule_swap", "grad", LONG))
case("prim_long-global_fwd-vag", n=LONG)(b_prim("global_fwd", "vag", LONG))


def b_prim_defbatch(kind):
    def build(compiled):
        @tt.primitive
        def p41c_sq(x):
            return np.square(x)
        p41c_sq.defvjp(lambda g, ans, x: 2 * x * g)
        p41c_sq.defjvp(lambda t, ans, x: 2 * x * t)
        if kind == "rule":
            tt.ops.batching.defbatch(p41c_sq, lambda prim, size, vals, dims, **kw: (np.square(vals[0]), dims[0]))
        h = _c(lambda X: tt.vmap(lambda v: tt.sum(p41c_sq(v)))(X), compiled)
        return (lambda i: h(_r(i, 2 + i % 3, 4))), (lambda: None)
    return build


for kind in ["loop", "rule"]:
    case(f"prim_defbatch-{kind}")(b_prim_defbatch(kind))


def b_prim_state(kind):
    def build(compiled):
        calls = []

        @tt.primitive
        def p41c_counter(x):
            if kind == "append":
                calls.append(1)
            if kind == "npdraw":
                return x + np.random.default_rng(0).standard_normal(x.shape)
            return x * len(calls)
        p41c_counter.defvjp(lambda g, ans, x: g)
        h = _c(lambda x: p41c_counter(x) * 2.0, compiled)
        return (lambda i: h(_r(i, 3))), (lambda: len(calls))
    return build


case("prim_state-append", expect="refused")(b_prim_state("append"))
case("prim_state-npdraw_local_seeded")(b_prim_state("npdraw"))


# ---------- 5: grad-mode contexts ----------

GRADMODES = ["outer_toggle", "no_grad_inside", "enable_grad_inside", "set_false_inside_ctx",
             "set_false_plain_restored", "decorator_no_grad", "inference_mode", "toggle_and_backward",
             "is_enabled_branch", "grad_under_no_grad", "vmap_under_no_grad", "detach_mix"]


def b_gradmode(kind, n):
    def build(compiled):
        W = tt.tensor(_r(0, 3, 2, seed=6), requires_grad=True)
        tt.set_grad_enabled(True)

        @tt.no_grad()
        def frozen(x):
            return tt.tanh(x @ W)

        def f(x):
            if kind in ("outer_toggle", "toggle_and_backward"):
                return tt.sum(tt.tanh(x @ W) ** 2)
            if kind == "no_grad_inside":
                with tt.no_grad():
                    a = x @ W
                return a * 2.0, tt.sum(x @ W)
            if kind == "enable_grad_inside":
                with tt.enable_grad():
                    return tt.sum(x @ W)
            if kind == "set_false_inside_ctx":
                with tt.set_grad_enabled(False):
                    a = tt.exp(x @ W)
                return a + tt.sum(W)
            if kind == "set_false_plain_restored":
                prev = tt.is_grad_enabled()
                tt.set_grad_enabled(False)
                a = x @ W
                tt.set_grad_enabled(prev)
                return a, tt.sum(a) * W
            if kind == "decorator_no_grad":
                return frozen(x) + 1.0
            if kind == "inference_mode":
                with tt.inference_mode():
                    return tt.sum(x @ W)
            if kind == "is_enabled_branch":
                return tt.sum(x @ W) * (2.0 if tt.is_grad_enabled() else 3.0)
            if kind == "grad_under_no_grad":
                with tt.no_grad():
                    return tt.grad(lambda w: tt.sum(tt.tanh(x @ w)))(W.data)
            if kind == "vmap_under_no_grad":
                with tt.no_grad():
                    return tt.vmap(lambda v: tt.tanh(v @ W))(x)
            if kind == "detach_mix":
                return tt.sum((x @ W).detach() * (x @ W))
            raise ValueError(kind)
        h = _c(f, compiled)

        def call(i):
            x = _r(i, 4, 3)
            if n == LONG and _chg(i):
                W.data = W.data * 0.5
            mode = (i % 3 != 1) if kind in ("outer_toggle", "toggle_and_backward", "is_enabled_branch",
                                            "enable_grad_inside", "no_grad_inside") else True
            with tt.set_grad_enabled(mode):
                out = h(x)
            if kind == "toggle_and_backward" and isinstance(out, tt.Tensor) and out.requires_grad:
                out.backward()
                g = W.grad.copy()
                W.grad = None
                return out, g, tt.is_grad_enabled()
            return out, tt.is_grad_enabled()
        return call, lambda: (_canon(W.data), _canon(W.grad))
    return build


for kind in GRADMODES:
    case(f"gradmode-{kind}")(b_gradmode(kind, N))
for kind in ["outer_toggle", "toggle_and_backward", "is_enabled_branch"]:
    case(f"gradmode_long-{kind}", n=LONG)(b_gradmode(kind, LONG))


def b_grad_left_off(compiled):
    W = tt.tensor(np.ones((3, 2)), requires_grad=True)

    def f(x):
        tt.set_grad_enabled(False)
        return x @ W
    h = _c(f, compiled)

    def call(i):
        tt.set_grad_enabled(True)
        out = h(_r(i, 4, 3))
        state = tt.is_grad_enabled()
        tt.set_grad_enabled(True)
        return out, state
    return call, lambda: None


case("gradmode-left_disabled_inside", expect="refused")(b_grad_left_off)


# ---------- 6: tt.data inside and around compiled functions ----------

def b_data(kind, n):
    def build(compiled):
        Xh = _r(0, 10, 3, seed=7)
        yh = _r(0, 10, seed=8)
        w = tt.tensor(np.zeros(3))
        gen = np.random.default_rng(3)
        tt.manual_seed(5)

        def step(xb, yb, lr):
            g = tt.grad(lambda ww: tt.mean((xb @ ww - yb) ** 2))(w.data)
            with tt.no_grad():
                w.sub_(lr * g)
            return g

        def f(lr):
            out = []
            if kind == "held_seed":
                it = tt.data.minibatches(Xh, yh, 4, rng=3)
            elif kind == "held_noshuffle":
                it = tt.data.minibatches(Xh, yh, 4, shuffle=False)
            elif kind == "held_droplast":
                it = tt.data.minibatches(Xh, yh, 4, shuffle=False, drop_last=True)
            elif kind == "held_generator":
                it = tt.data.minibatches(Xh, yh, 4, rng=gen)
            elif kind == "held_global":
                it = tt.data.minibatches(Xh, yh, 4)
            for xb, yb in it:
                out.append(step(xb, yb, lr))
            return out
        h = _c(f, compiled)
        hs = _c(step, compiled)

        def call(i):
            if kind == "outside":
                return [hs(xb, yb, 0.1) for xb, yb in tt.data.minibatches(Xh, yh, 3 + (i % 2), rng=gen)]
            if kind == "args_refused":
                return _c(lambda X, y: [tt.sum(a) for a, _ in tt.data.minibatches(X, y, 4, rng=1)], compiled)(
                    Xh * i, yh)
            if n == LONG and _chg(i):
                Xh[0, 0] += 1.0
            return h(0.1 + 0.01 * (i % 3))
        return call, lambda: (_canon(w), _canon(gen.bit_generator.state["state"]), _canon(tt.get_rng_state()))
    return build


for kind in ["held_seed", "held_noshuffle", "held_droplast", "held_global", "outside"]:
    case(f"data-{kind}")(b_data(kind, N))
for kind in ["held_seed", "held_global"]:
    case(f"data_long-{kind}", n=LONG)(b_data(kind, LONG))
case("data-held_generator", expect="refused")(b_data("held_generator", N))
case("data_long-held_generator", n=LONG, expect="refused")(b_data("held_generator", LONG))


def b_mb_helper(names_grad):
    def build(compiled):
        X, y = np.arange(20.0).reshape(10, 2), np.arange(10.0)
        tt.manual_seed(5)

        def helper_g(xb):
            if xb is None:
                tt.grad  # noqa: B018
            return xb[0] * 1.0

        def helper_p(xb):
            return xb[0] * 1.0
        helper = helper_g if names_grad else helper_p

        def f():
            return [helper(xb) for xb, _ in tt.data.minibatches(X, y, 4)]
        h = _c(f, compiled)
        return (lambda i: h()), (lambda: _canon(tt.get_rng_state()))
    return build


case("data-held_global_unrun_grad")(b_mb_helper(True))
case("data-held_global_plain_helper", expect="refused")(b_mb_helper(False))
case("data-args_refused", expect="refused")(b_data("args_refused", N))


# ---------- 7: compile options: check=, fuse=, disable(), recompiles, the limit ----------

def b_opt(kind, n):
    def build(compiled):
        W = tt.tensor(_r(0, 3, 3, seed=9))
        ln = tt.nn.LayerNorm(3, dtype=np.float64)
        cfg = {"k": 1.0}

        def f(x):
            z = tt.tanh(x @ W) * cfg["k"]
            if kind.startswith("fuse_ln"):
                return ln(z)
            return tt.value_and_grad(lambda u: tt.sum(tt.vmap(lambda r: tt.softmax(r * u))(z)))(1.5)
        kw = {}
        if kind == "check":
            kw = {"check": True}
        elif kind in ("fuse", "fuse_ln"):
            kw = {"fuse": True}
        elif kind == "cache1":
            kw = {"cache_size": 1}
        h = _c(f, compiled, **kw)

        def call(i):
            prev = None
            if kind == "disable" and i in (3, 4, 10):
                prev = tt.compile.disable()
            try:
                if kind in ("limit", "cache1"):
                    x = _r(i, 2 + (i % 11 if kind == "limit" else i % 2), 3)
                else:
                    x = _r(i, 4, 3)
                if n == LONG and _chg(i):
                    cfg["k"] += 0.5
                    W.data[1] *= -1.0
                return h(x)
            finally:
                if prev is not None:
                    tt.compile.disable(prev)
        return call, lambda: _canon(W)
    return build


for kind in ["check", "fuse", "fuse_ln", "cache1", "disable", "limit", "plain"]:
    case(f"opt-{kind}")(b_opt(kind, N))
    case(f"opt_long-{kind}", n=LONG)(b_opt(kind, LONG))


# ---------- 8: randomness through vmap inside compiled functions ----------

def b_vrand(kind, n):
    def build(compiled):
        d = tt.nn.Dropout(0.5, rng=1)
        g = tt.rng.Generator(4) if hasattr(tt.rng, "Generator") else None
        tt.manual_seed(21)

        def f(X):
            if kind == "dropout_different":
                return tt.vmap(d, randomness="different")(X)
            if kind == "dropout_same":
                return tt.vmap(d, randomness="same")(X)
            if kind == "randn_same":
                return tt.vmap(lambda v: v + tt.randn(3), randomness="same")(X)
            if kind == "rand_same_global_grad":
                return tt.vmap(tt.grad(lambda v: tt.sum(v * tt.rand(3))), randomness="same")(X)
            if kind == "dropout_error":
                return tt.vmap(d)(X)
            if kind == "randn_different":
                return tt.vmap(lambda v: v + tt.randn(3), randomness="different")(X)
            raise ValueError(kind)
        h = _c(f, compiled)

        def call(i):
            if n == LONG and _chg(i):
                tt.manual_seed(100 + i)
                d.p = 0.25 if i == 9 else 0.5
            if i == 5:
                d.eval()
            if i == 7:
                d.train()
            return h(_r(i, 4 + (i % 2), 3))
        return call, lambda: (_canon(tt.get_rng_state()), _canon(g))
    return build


for kind in ["dropout_different", "dropout_same", "randn_same", "rand_same_global_grad", "dropout_error",
             "randn_different"]:
    case(f"vrand-{kind}")(b_vrand(kind, N))
for kind in ["dropout_different", "randn_same"]:
    case(f"vrand_long-{kind}", n=LONG)(b_vrand(kind, LONG))


# ---------- 9: gradients at and beyond the edges, kinks, batch sizes 0 and 1 ----------

def _first(v):
    return v[0] if isinstance(v, tuple) else v


def b_edge_grad(fname, how):
    def build(compiled):
        fn = SPECIAL[fname]
        if how == "grad":
            f = tt.grad(lambda u: tt.sum(_first(fn(u))))
        elif how == "jvp":
            f = lambda u: tt.jvp(lambda v: _first(fn(v)), (u,), (np.ones_like(u),))  # noqa: E731
        else:
            f = lambda u: tt.vmap(tt.grad(lambda v: tt.sum(_first(fn(v)))))(u.reshape(3, 4))  # noqa: E731
        h = _c(f, compiled)
        return (lambda i: h(EDGE * (1.0 + 0.5 * (i % 2)) * (-1.0 if i % 3 == 2 else 1.0))), (lambda: None)
    return build


for fname in SPECIAL:
    if fname in ("gammasgn",):
        continue
    case(f"edge_grad-{fname}")(b_edge_grad(fname, "grad"))
for fname in ["gammaln", "erfinv", "logit", "xlogy", "entr", "log_ndtr", "ndtri", "softplus", "expit", "i1"]:
    case(f"edge_jvp-{fname}")(b_edge_grad(fname, "jvp"))
    case(f"edge_vmapgrad-{fname}")(b_edge_grad(fname, "vmapgrad"))


def b_edge_dist(dname):
    def build(compiled):
        fn = DISTS[dname]
        h = _c(tt.grad(lambda x, s: tt.sum(fn(x, s)), argnums=(0, 1)), compiled)

        def call(i):
            s = np.full(12, [1.0, 0.5, 0.0, -1.0, 2.0, np.inf][i % 6])
            return h(EDGE * (1.0 + 0.05 * (i % 2)), s)
        return call, lambda: None
    return build


for dname in ["norm_logpdf", "norm_cdf", "norm_logsf", "t_logpdf", "t_dfinf", "gamma_logpdf", "gamma_a1",
              "chi2_logpdf", "beta_logpdf", "beta_pdf_half", "beta_logcdf", "norm_ppf"]:
    case(f"edge_dist-{dname}")(b_edge_dist(dname))


KINKS = {
    "abs": lambda v: tt.sum(tt.abs(v) * v),
    "maximum": lambda v: tt.sum(tt.maximum(v, 0.0) ** 2),
    "relu_prod": lambda v: tt.sum(tt.relu(v) * tt.relu(-v) + v ** 2),
    "clip": lambda v: tt.sum(tt.clip(v, -0.5, 0.5) * v),
    "where_div": lambda v: tt.sum(tt.where(v != 0, tt.sin(v) / tt.where(v != 0, v, 1.0), 1.0)),
    "sqrt_sq": lambda v: tt.sum(tt.sqrt(v ** 2 + 0.0)),
    "max": lambda v: tt.max(v) * tt.min(v),
    "sort": lambda v: tt.sum(tt.sort(v) * np.arange(4.0)),
}


def b_kink(kname, how):
    def build(compiled):
        fn = KINKS[kname]
        w = tt.tensor(np.array([1.0, -1.0, 0.5, -0.0]))
        g = lambda v: fn(v * w)  # noqa: E731
        f = {"hess": tt.hessian(g), "jac_grad": tt.jacobian(tt.grad(g)), "grad": tt.grad(g),
             "vmap_hess": tt.vmap(tt.hessian(g))}[how]
        h = _c(f, compiled)

        def call(i):
            v = np.array([0.0, -0.0, 1.0, -2.0]) * (i % 3) + np.array([0.0, 0.0, 0.0, 0.5 * (i % 2)])
            if how == "vmap_hess":
                v = np.stack([v, -v, v * 0.0])
            if i % 4 == 3:
                w.data[1] *= -1.0
            return h(v)
        return call, lambda: _canon(w)
    return build


for kname in KINKS:
    for how in ("hess", "grad", "vmap_hess"):
        case(f"kink-{kname}-{how}")(b_kink(kname, how))


def b_batch_edge(kind):
    def build(compiled):
        W = tt.tensor(_r(0, 3, 2, seed=11))
        if kind == "vmap_inside":
            h = _c(lambda X: tt.vmap(lambda v: tt.tanh(v @ W))(X), compiled)
        elif kind == "vmap_grad_inside":
            h = _c(lambda X: tt.vmap(tt.grad(lambda v: tt.sum(tt.tanh(v @ W))))(X), compiled)
        else:
            h = tt.vmap(_c(lambda v: tt.tanh(v @ W), compiled))
        return (lambda i: h(_r(i, [0, 1, 2, 1, 0, 3][i % 6], 3))), (lambda: _canon(W))
    return build


for kind in ["vmap_inside", "vmap_grad_inside", "vmap_of_compiled"]:
    case(f"batch_edge-{kind}")(b_batch_edge(kind))


def b_jac_branch(kind):
    def build(compiled):
        a = tt.tensor(np.array([0.5, -1.0, 2.0]))

        def g(x):
            if kind == "python_branch":
                return tt.sin(x * a) if float(tt.sum(x)) > 0 else tt.cos(x) * a
            if kind == "setitem":
                h = tt.zeros(3)
                h[0] = x[1] * a[0]
                return h + x
            return tt.tanh(x) * a
        f = tt.jacobian(g)
        h = _c(f, compiled)

        def call(i):
            a.data += 0.1
            return h(_r(i, 3))
        return call, lambda: _canon(a)
    return build


for kind in ["python_branch", "setitem", "plain"]:
    case(f"jac_loop_fallback-{kind}")(b_jac_branch(kind))


def b_return_pullback(kind):
    def build(compiled):
        def f(x):
            out, pb = tt.vjp(tt.sin, x)
            if kind == "pullback":
                return out, pb
            return out, pb(np.ones_like(x))
        h = _c(f, compiled)
        return (lambda i: h(_r(i, 3))[1 if kind != "pullback" else 0]), (lambda: None)
    return build


case("return_pullback-called")(b_return_pullback("called"))
case("return_pullback-returned", expect="refused")(b_return_pullback("pullback"))


# ---------- 10: signed zeros through a user primitive's rules under vmap ----------

def b_prim_signed(kind, batch_rule):
    def build(compiled):
        def cz(x):
            return x ** 3
        cz.__name__ = cz.__qualname__ = f"p41c_cz_{kind}_{int(batch_rule)}"
        p41c_cz = tt.primitive(cz)
        p41c_cz.defvjp(lambda g, ans, x: 3 * x ** 2 * g)
        p41c_cz.defjvp(lambda t, ans, x: 3 * x ** 2 * t)
        if batch_rule:
            tt.ops.batching.defbatch(p41c_cz, lambda prim, size, vals, dims, **kw: (vals[0] ** 3, dims[0]))
        wa = np.array([0.3, -0.2, 0.9])
        fs = {
            "jac_w_array": lambda x: tt.jacobian(lambda u: p41c_cz(u) * wa)(x),
            "jac_neg": lambda x: tt.jacobian(lambda u: -p41c_cz(u))(x),
            "jac_plain": lambda x: tt.jacobian(p41c_cz)(-x),
            "jacfwd_w": lambda x: tt.jacobian(lambda u: p41c_cz(u) * wa, mode="fwd")(x),
            "vmap_vjp": lambda x: tt.vmap(tt.vjp(lambda u: p41c_cz(u) * wa, x)[1])(np.eye(3)),
            "vmap_vjp_neg_basis": lambda x: tt.vmap(tt.vjp(p41c_cz, x)[1])(-np.eye(3)),
            "vmap_fwd": lambda x: tt.vmap(p41c_cz)(np.stack([x, -x * 0.0])),
            "vmap_grad": lambda x: tt.vmap(tt.grad(lambda u: tt.sum(p41c_cz(u) * -1.0)))(np.stack([x, x * 0.0])),
            "vmap_jvp": lambda x: tt.vmap(lambda u: tt.jvp(p41c_cz, (u,), (-u,)))(np.stack([x, -x * 0.0])),
        }
        h = _c(fs[kind], compiled)
        return (lambda i: h(_r(i, 3))), (lambda: None)
    return build


R_PRIM_VMAP = R_PRIM_JAC
for kind in ["jac_w_array", "jac_neg", "jac_plain", "jacfwd_w", "vmap_vjp", "vmap_vjp_neg_basis", "vmap_fwd",
             "vmap_grad", "vmap_jvp"]:
    for br in (False, True):
        bad = not br and kind in ("jac_w_array", "jac_neg", "vmap_vjp", "vmap_vjp_neg_basis", "vmap_grad")
        case(f"prim_signed-{kind}-{'rule' if br else 'loop'}", xfail=R_PRIM_VMAP if bad else None)(
            b_prim_signed(kind, br))


# ---------- 11: compositions: nested compiled functions, tape entries, check= with draws ----------

def b_compose(kind, n):
    def build(compiled):
        W = tt.tensor(_r(0, 3, 2, seed=12), requires_grad=True)
        d = tt.nn.Dropout(0.3, rng=2)
        inner = _c(lambda X: tt.vmap(lambda v: tt.tanh(v @ W))(X), compiled)

        def f(X):
            if kind == "nested":
                return tt.sum(inner(X) ** 2)
            if kind == "nested_grad":
                return tt.grad(lambda X_: tt.sum(inner(X_)))(X)
            if kind == "vmap_dropout_check":
                return tt.vmap(lambda v: d(tt.tanh(v @ W)), randomness="different")(X)
            if kind == "backward_entry":
                return tt.sum(tt.vmap(lambda v: tt.tanh(v @ W))(X) ** 2)
            if kind == "jvp_entry":
                return tt.vmap(lambda v: tt.sin(v @ W))(X)
            raise ValueError(kind)
        h = _c(f, compiled, check=(kind == "vmap_dropout_check"))

        def call(i):
            if n == LONG and _chg(i):
                W.data = W.data * -0.5
            X = _r(i, 4 + (i % 2), 3)
            if kind in ("backward_entry", "nested"):
                out = h(X)
                out.backward()
                g = W.grad.copy()
                W.grad = None
                with tt.no_grad():
                    W.sub_(0.01 * g)
                return out, g
            if kind == "jvp_entry":
                with tt.no_grad():
                    return h(X)
            return h(X)
        return call, lambda: (_canon(W), _canon(tt.get_rng_state()), _canon(d.training))
    return build


for kind in ["nested", "nested_grad", "vmap_dropout_check", "backward_entry", "jvp_entry"]:
    case(f"compose-{kind}")(b_compose(kind, N))
    case(f"compose_long-{kind}", n=LONG)(b_compose(kind, LONG))


@pytest.mark.parametrize("build,expect,n", CASES)
def test_round41c(build, expect, n):
    _check(build, expect, n)
