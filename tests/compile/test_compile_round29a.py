"""Round 29a: a fresh JAX user's sweep of `tt.compile` against eager, bit for bit.

Every public differentiable function I could find (elementwise and piecewise math, reductions,
sorting and selection, computed indices, cumulative ops, losses and normalisations, pooling,
`tt.linalg`, `tt.scipy.special`) composed with transforms (grad, hessian, hvp, jvp of grad,
vmap, vmap of grad, jacobian rev and fwd, grad of grad; and vmap of hessian / jacobian / hvp,
grad of vmap, fwd jacobian of grad, jvp, vjp, value_and_grad with aux), compiled as
`tt.compile(transform(f))` ("outer") and with the transform inside ("inner"). Inputs change
on every call (signs, ties, exact zeros, reversed orders, LU pivots, eigenvalue order and
near-degeneracy, near-singular matrices, scales across softplus / log_ndtr / erfc branches,
poles of gamma functions); 12 calls per case, 42 for some. Outputs are compared by type,
dtype, shape and bytes; eager errors must be raised compiled with the same type; a compiled
refusal where eager runs fails. A second group feeds one number (a Python float, a number
argument of the program, or a 0-d array) to grad, grad of grad, hessian and jvp of grad.

Counts: 849 cases; 819 equal; 30 strict xfails; 0 refusals.

xfails by class:

* frozen-branch (4): cumprod's derivative rule chooses between its zero-safe formula and its
  division formula from the recorded input; under hessian, hvp, jvp of grad and grad of grad
  the compiled program replays the recorded choice: ulp differences when recorded on zeros
  and replayed without, NaN/inf (with warnings) where eager is finite the other way round
  (cumprod-hessian-outer, cumprod-hvp-inner, cumprod-jvp_grad-outer, cumprod-grad_grad-inner).
* nan-bits (2): hvp and jvp of grad of F.normalize at the zero vector give a NaN with other
  bits than eager's (normalize-hvp-inner, normalize-jvp_grad-outer).
* signed-zero (3): second order through adaptive_max_pool2d with tied windows gives -0.0 where
  eager gives 0.0 (adaptive_max_pool2d-hessian-outer, -grad_grad-inner, -grad_of_vmap-outer);
  F.max_pool2d on the same inputs is equal.
* 0-d type, documented (21): tt.hessian of a function of one number is a NumPy float64 eagerly
  and a 0-d ndarray compiled (num-*-hessian-*; the compile guide lists this gap).
"""
import math
import warnings

import numpy as np
import pytest

import tinytensor as tt

F = tt.nn.functional
L = tt.linalg
S = tt.scipy.special


# ---------------------------------------------------------------- harness
def _same(a, b, path="out"):
    if type(a) is not type(b):
        return f"{path}: type {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, (tuple, list)):
        if len(a) != len(b):
            return f"{path}: len {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            r = _same(x, y, f"{path}[{i}]")
            if r:
                return r
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys differ"
        for k in a:
            r = _same(a[k], b[k], f"{path}[{k!r}]")
            if r:
                return r
        return None
    if isinstance(a, tt.Tensor):
        return _same(a.data, b.data, path + ".data")
    if isinstance(a, (np.ndarray, np.generic)):
        if a.dtype != b.dtype:
            return f"{path}: dtype {a.dtype} != {b.dtype}"
        if np.shape(a) != np.shape(b):
            return f"{path}: shape {np.shape(a)} != {np.shape(b)}"
        if np.ascontiguousarray(a).tobytes() != np.ascontiguousarray(b).tobytes():
            fa, fb = np.asarray(a).ravel(), np.asarray(b).ravel()
            k = next(j for j in range(fa.size) if fa[j:j + 1].tobytes() != fb[j:j + 1].tobytes())
            return f"{path}: values differ at flat {k}: eager {fa[k]!r} compiled {fb[k]!r}"
        return None
    if a != b and not (isinstance(a, float) and math.isnan(a) and math.isnan(b)):
        return f"{path}: {a!r} != {b!r}"
    return None


def _copy(args):
    return tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args)


def _run(fn, args):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            return "ok", fn(*_copy(args)), [str(x.message) for x in w]
        except Exception as e:  # noqa: BLE001
            return "raise", e, [str(x.message) for x in w]


def check(eager_fn, compiled_fn, gen, n, seed, documented_refusal=None):
    rng = np.random.default_rng(seed)
    for call in range(n):
        args = gen(rng, call)
        ek, ev, _ = _run(eager_fn, args)
        ck, cv, cw = _run(compiled_fn, args)
        if ek == "raise":
            assert ck == "raise", f"call {call}: eager raised {type(ev).__name__}: {ev}; compiled returned"
            assert type(cv) is type(ev), (
                f"call {call}: eager raised {type(ev).__name__}, compiled {type(cv).__name__}: {cv}")
            continue
        if ck == "raise":
            msg = str(cv)
            if documented_refusal and documented_refusal in msg:
                return
            raise AssertionError(f"call {call}: false refusal / crash {type(cv).__name__}: {msg[:300]}")
        d = _same(ev, cv)
        if d:
            warned = f" (after warning {cw[0][:80]!r})" if cw else ""
            raise AssertionError(f"call {call}: {d}{warned}")


# ---------------------------------------------------------------- input families
# Every family draws anew on each call and flips what a tracer could freeze:
# signs, ties, exact zeros, orderings, pivots, scales crossing thresholds.
def _vec(rng, i, n=4):
    x = rng.standard_normal(n)
    if i % 3 == 1:
        x[2] = x[0]                      # a tie
    if i % 4 == 2:
        x[1] = 0.0                       # an exact zero
    if i % 5 == 3:
        x = x[::-1].copy()               # the order reversed
    return x * (-1.0) ** (i // 2)        # signs flip every other call


def fam_vec(rng, i):
    return _vec(rng, i)


def fam_vec5(rng, i):
    return _vec(rng, i, 5)


def fam_vec32(rng, i):
    return _vec(rng, i).astype(np.float32)


def fam_wide(rng, i):
    return _vec(rng, i) * (0.3, 4.0, 30.0, 60.0)[i % 4]


def fam_pos(rng, i):
    return np.abs(_vec(rng, i)) + 0.05 + (0.0, 3.0, 12.0)[i % 3]


def fam_neg(rng, i):                     # crosses the poles of gamma-like functions
    return _vec(rng, i) * 2.5 + 0.25


def fam_unit(rng, i):
    x = np.tanh(_vec(rng, i))
    if i % 3 == 0:
        x[3] = (0.999999, -0.999999)[i % 2]
    return x


def fam_prob(rng, i):
    return (fam_unit(rng, i) + 1.0) / 2.0 * 0.998 + 0.001


def fam_zeros(rng, i):                   # x = 0 exactly on some calls, then all zeros
    x = _vec(rng, i)
    if i % 3 == 0:
        x[:] = 0.0
    return x


def fam_quant16(rng, i):                 # many exact ties (pooling windows)
    return rng.integers(-2, 3, 16) * 0.5 + (0.0 if i % 2 else 0.25 * rng.integers(0, 2, 16))


def fam_mat(rng, i):                     # row order permuted: LU pivots change
    a = rng.standard_normal((3, 3))
    a = a[rng.permutation(3)]
    if i % 4 == 1:
        a[:, 0] *= 1e3
    return a * (-1.0) ** i


def fam_nearsing(rng, i):
    a = rng.standard_normal((3, 3))
    a[2] = a[0] + a[1] + (1e-9 if i % 2 else -1e-9) * rng.standard_normal(3)
    return a


def fam_spd(rng, i):
    a = rng.standard_normal((3, 3))
    return a @ a.T + (0.5, 1e-6)[i % 2] * np.eye(3)


def fam_sym(rng, i):                     # eigenvalue order and near-degeneracy change
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    lam = rng.standard_normal(3) * 2
    if i % 3 == 0:
        lam[1] = lam[0] + 1e-4 * (-1) ** i
    return (q * lam) @ q.T


def fam_mat4(rng, i):
    a = rng.standard_normal((4, 4))
    if i % 3 == 2:
        a[:, 1] = a[:, 3]                # tied column sums / rank drop
    return a * (-1.0) ** (i // 2)


B3 = np.array([[1.0, 0.5], [-2.0, 0.25], [0.75, 3.0]])
XP = np.array([-1.0, -0.2, 0.4, 1.5])
FP = np.array([0.5, -1.0, 2.0, 0.3])
TGT = np.array([0.3, -0.7, 0.0, 1.1])
TGT01 = np.array([0.0, 1.0, 0.25, 1.0])
LBL = np.array([1, 0])
W4 = np.array([0.5, -1.5, 2.0, 1.0])


def _roll_argmax(x):
    return tt.roll(x, int(tt.argmax(x)))


def _py_branch(x):
    return x ** 2 if float(tt.sum(x)) > 0 else tt.sin(x) * 3.0


def _eigh_op(a):
    r = L.eigh(a)
    return r[0][:, None] * r[1] ** 2


def _svd_polar(a):
    r = L.svd(a)
    return r[0] @ r[2]


def _slogdet_op(a):
    r = L.slogdet(a)
    return r[0] * r[1]


def _lu_free_solve(a):
    return L.solve(a, B3)


# ---------------------------------------------------------------- functions
# (name, op, family, full): op maps one example to an array; full=True runs every
# transform, otherwise a rotating subset of four.
FUNCS = [
    # piecewise / elementwise
    ("abs", tt.abs, fam_vec, True),
    ("relu", tt.relu, fam_vec, True),
    ("leaky_relu", lambda x: tt.leaky_relu(x, 0.1), fam_vec, False),
    ("clip", lambda x: tt.clip(x, -0.5, 0.5), fam_vec, True),
    ("clamp_min", lambda x: tt.clamp(x, min=-0.3), fam_vec, False),
    ("maximum_flip", lambda x: tt.maximum(x, tt.flip(x, 0)), fam_vec, True),
    ("minimum_roll", lambda x: tt.minimum(x, tt.roll(x, 2) * 0.5), fam_vec, False),
    ("fmax", lambda x: tt.fmax(x, x * x - 0.5), fam_vec, False),
    ("fmin", lambda x: tt.fmin(x, tt.flip(x, 0)), fam_vec, False),
    ("where_branch", lambda x: tt.where(x > 0, x ** 2, tt.sin(x)), fam_vec, True),
    ("floor_mul", lambda x: x * tt.floor(x * 2), fam_vec, False),
    ("round_mul", lambda x: x * tt.round(x), fam_vec, False),
    ("trunc_mul", lambda x: x ** 2 * tt.trunc(x * 3), fam_vec, False),
    ("ceil_mul", lambda x: x * tt.ceil(x), fam_vec, False),
    ("sign_mul", lambda x: tt.sign(x) * x ** 2, fam_vec, True),
    ("heaviside_mul", lambda x: x ** 3 * tt.heaviside(x, 0.5), fam_vec, False),
    ("remainder", lambda x: tt.remainder(x * 3, 1.0), fam_vec, False),
    ("floor_divide", lambda x: x * tt.floor_divide(x, 0.5), fam_vec, False),
    ("sqrt_abs", lambda x: tt.sqrt(tt.abs(x) + 1e-3), fam_vec, False),
    ("log_abs", lambda x: tt.log(tt.abs(x) + 0.1), fam_vec, False),
    ("sinc", tt.sinc, fam_zeros, True),
    ("arctan2", lambda x: tt.arctan2(x, tt.roll(x, 1)), fam_vec, False),
    ("hypot", lambda x: tt.hypot(x, tt.roll(x, 1)), fam_zeros, False),
    ("logaddexp", lambda x: tt.logaddexp(x, -x), fam_wide, False),
    ("logaddexp2", lambda x: tt.logaddexp2(x, x * 0.5), fam_wide, False),
    ("softplus", tt.softplus, fam_wide, True),
    ("F.softplus_thr", lambda x: F.softplus(x, beta=2.0, threshold=5.0), fam_wide, True),
    ("gelu", tt.gelu, fam_wide, False),
    ("gelu_tanh", lambda x: tt.gelu(x, approximate="tanh"), fam_wide, False),
    ("elu", F.elu, fam_vec, True),
    ("silu", F.silu, fam_wide, False),
    ("mish", F.mish, fam_wide, False),
    ("prelu", lambda x: F.prelu(x, np.array([0.2])), fam_vec, False),
    ("power_abs", lambda x: tt.power(tt.abs(x), 1.5), fam_zeros, False),
    ("pow_int", lambda x: x ** 3 - x, fam_vec32, False),
    ("sigmoid", tt.sigmoid, fam_wide, False),
    ("tanh32", tt.tanh, fam_vec32, False),
    ("expm1_log1p", lambda x: tt.log1p(tt.expm1(x) ** 2), fam_vec, False),
    ("arcsin", tt.arcsin, fam_unit, False),
    ("arctanh", tt.arctanh, fam_unit, False),
    ("arccosh", lambda x: tt.arccosh(x + 1.0), fam_pos, False),
    ("exp2_log2", lambda x: tt.exp2(tt.log2(x)) * tt.log10(x), fam_pos, False),
    # reductions, sorting and selection
    ("max", tt.max, fam_vec, True),
    ("min_axis0", lambda a: tt.min(a, axis=0), fam_mat4, True),
    ("max_keepdims", lambda a: a * tt.max(a, axis=1, keepdims=True), fam_mat4, False),
    ("median4", tt.median, fam_vec, True),
    ("median5", tt.median, fam_vec5, False),
    ("quantile", lambda x: tt.quantile(x, 0.3), fam_vec5, True),
    ("percentile", lambda x: tt.percentile(x, [10.0, 75.0]), fam_vec, False),
    ("logsumexp", tt.logsumexp, fam_wide, False),
    ("softmax", tt.softmax, fam_wide, False),
    ("log_softmax", tt.log_softmax, fam_wide, False),
    ("sort", tt.sort, fam_vec, True),
    ("sort32", tt.sort, fam_vec32, False),
    ("argsort_take", lambda x: tt.take(x, tt.argsort(x)) * W4, fam_vec, True),
    ("argmax_index", lambda x: x * x[tt.argmax(x)], fam_vec, True),
    ("argmin_take", lambda x: tt.take(x, tt.argmin(x)) * x, fam_vec, False),
    ("take_along_argsort", lambda a: tt.take_along_axis(a, tt.argsort(a, axis=1), axis=1) * W4,
     fam_mat4, True),
    ("roll_by_argmax", _roll_argmax, fam_vec, True),
    ("python_branch", _py_branch, fam_vec, True),
    ("cumsum_abs", lambda x: tt.cumsum(tt.abs(x)), fam_vec, False),
    ("cumprod", tt.cumprod, fam_zeros, True),
    ("prod", tt.prod, fam_zeros, True),
    ("diff_abs", lambda x: tt.diff(tt.abs(x)), fam_vec, False),
    ("std", tt.std, fam_zeros, False),
    ("var_axis", lambda a: tt.var(a, axis=1), fam_mat4, False),
    ("norm_vec", L.norm, fam_zeros, True),
    ("vector_norm_inf", lambda x: L.vector_norm(x, ord=np.inf), fam_vec, True),
    ("vector_norm_1", lambda x: L.vector_norm(x, ord=1), fam_zeros, False),
    ("frobenius_norm", tt.frobenius_norm, fam_zeros, False),
    ("interp", lambda x: tt.interp(x, XP, FP), fam_vec, True),
    ("trapezoid", lambda x: tt.trapezoid(tt.abs(x)), fam_vec, False),
    ("clip_sort_chain", lambda x: tt.sort(tt.clip(x, -0.4, 0.9)) * W4, fam_vec, False),
    # losses and normalisations
    ("huber", lambda x: F.huber_loss(x, TGT, reduction="none", delta=0.5), fam_vec, True),
    ("smooth_l1", lambda x: F.smooth_l1_loss(x, TGT, reduction="none", beta=0.5), fam_vec, False),
    ("l1_loss", lambda x: F.l1_loss(x, TGT, reduction="none"), fam_vec, False),
    ("mse_loss", lambda x: F.mse_loss(x, TGT, reduction="sum"), fam_vec, False),
    ("bce_logits", lambda x: F.binary_cross_entropy_with_logits(x, TGT01, reduction="none"),
     fam_wide, False),
    ("cross_entropy", lambda x: F.cross_entropy(x.reshape(2, 2), LBL, reduction="none"),
     fam_wide, False),
    ("normalize", lambda x: F.normalize(x, dim=0), fam_zeros, True),
    ("layer_norm", lambda x: F.layer_norm(x, (4,)), fam_vec, False),
    ("rms_norm", lambda x: F.rms_norm(x, (4,)), fam_vec, False),
    ("max_pool2d", lambda x: F.max_pool2d(x.reshape(1, 1, 4, 4), 2).reshape(-1), fam_quant16, True),
    ("adaptive_max_pool2d",
     lambda x: F.adaptive_max_pool2d(x.reshape(1, 1, 4, 4), (2, 2)).reshape(-1), fam_quant16, True),
    # linear algebra
    ("solve", _lu_free_solve, fam_mat, True),
    ("inv", L.inv, fam_mat, True),
    ("det", L.det, fam_nearsing, True),
    ("det_mat", L.det, fam_mat, False),
    ("slogdet", _slogdet_op, fam_mat, True),
    ("cholesky", L.cholesky, fam_spd, True),
    ("eigh", _eigh_op, fam_sym, True),
    ("eigvalsh", L.eigvalsh, fam_sym, True),
    ("svd_polar", _svd_polar, fam_mat, True),
    ("svdvals", L.svdvals, fam_mat, True),
    ("norm_fro", L.norm, fam_mat, False),
    ("matrix_norm_nuc", lambda a: L.matrix_norm(a, ord="nuc"), fam_mat, False),
    ("matrix_norm_2", lambda a: L.matrix_norm(a, ord=2), fam_mat, True),
    ("norm_ord1", lambda a: L.norm(a, ord=1), fam_mat4, True),
    ("norm_ordinf", lambda a: L.norm(a, ord=np.inf), fam_mat4, True),
    ("norm_ord_m2", lambda a: L.matrix_norm(a, ord=-2), fam_mat, False),
    ("matrix_power3", lambda a: L.matrix_power(a, 3), fam_mat, False),
    ("matrix_power_m2", lambda a: L.matrix_power(a, -2), fam_mat, False),
    ("multi_dot", lambda a: L.multi_dot([a, a.T, a]), fam_mat, False),
    ("trace_triu", lambda a: tt.trace(tt.triu(a)) * tt.tril(a), fam_mat, False),
    ("diagonal_argmax", lambda a: tt.diagonal(a) * tt.max(tt.diagonal(a)), fam_mat, False),
    # tt.scipy.special
    ("gammaln", S.gammaln, fam_neg, True),
    ("gamma", S.gamma, fam_neg, False),
    ("rgamma", S.rgamma, fam_neg, False),
    ("digamma", S.digamma, fam_neg, True),
    ("polygamma1", lambda x: S.polygamma(1, x), fam_pos, False),
    ("erf", S.erf, fam_wide, False),
    ("erfc", S.erfc, fam_wide, False),
    ("erfinv", S.erfinv, fam_unit, True),
    ("erfcinv", lambda x: S.erfcinv(x + 1.0), fam_unit, False),
    ("ndtr", S.ndtr, fam_wide, False),
    ("ndtri", S.ndtri, fam_prob, False),
    ("log_ndtr", S.log_ndtr, fam_wide, True),
    ("logit", S.logit, fam_prob, False),
    ("expit", S.expit, fam_wide, False),
    ("xlogy", lambda x: S.xlogy(x, tt.abs(x) + 0.5), fam_zeros, True),
    ("xlog1py", lambda x: S.xlog1py(x, x * x), fam_zeros, False),
    ("entr", S.entr, fam_zeros, True),
    ("i0", S.i0, fam_wide, False),
    ("i0e", S.i0e, fam_vec, False),
    ("i1", S.i1, fam_vec, False),
    ("i1e", S.i1e, fam_wide, False),
    ("j0", S.j0, fam_wide, False),
    ("j1", S.j1, fam_wide, False),
    ("y0", S.y0, fam_pos, False),
    ("y1", S.y1, fam_pos, False),
    ("iv", lambda x: S.iv(1.5, x), fam_pos, False),
    ("jv", lambda x: S.jv(0.5, x), fam_pos, False),
    ("betaln", lambda x: S.betaln(x, 2.0), fam_pos, False),
    ("gammainc", lambda x: S.gammainc(2.0, x), fam_pos, False),
    ("gammaincc", lambda x: S.gammaincc(1.5, x), fam_pos, False),
    ("multigammaln", lambda x: S.multigammaln(x + 2.0, 2), fam_pos, False),
    ("sp_logsumexp", S.logsumexp, fam_wide, False),
    ("sp_softplus", S.softplus, fam_wide, False),
]

TRANSFORMS = ["grad", "hessian", "hvp", "jvp_grad", "vmap", "vmap_grad", "jac_rev", "jac_fwd",
              "grad_grad"]


def _scalar(op):
    return lambda x: tt.sum(tt.sin(op(x)))


def build(op, kind):
    f = _scalar(op)
    if kind == "grad":
        return tt.grad(f), 1, False
    if kind == "hessian":
        return tt.hessian(f), 1, False
    if kind == "hvp":
        return (lambda x, v: tt.hvp(f, (x,), (v,))), 2, False
    if kind == "jvp_grad":
        return (lambda x, v: tt.jvp(tt.grad(f), (x,), (v,))), 2, False
    if kind == "vmap":
        return tt.vmap(op), 1, True
    if kind == "vmap_grad":
        return tt.vmap(tt.grad(f)), 1, True
    if kind == "jac_rev":
        return tt.jacobian(op), 1, False
    if kind == "jac_fwd":
        return tt.jacobian(op, mode="fwd"), 1, False
    if kind == "grad_grad":
        return tt.grad(lambda x: tt.sum(tt.tanh(tt.grad(f)(x)))), 1, False
    if kind == "vmap_hessian":
        return tt.vmap(tt.hessian(f)), 1, True
    if kind == "vmap_jac_rev":
        return tt.vmap(tt.jacobian(op)), 1, True
    if kind == "vmap_hvp":
        return tt.vmap(lambda x, v: tt.hvp(f, (x,), (v,))), 2, True
    if kind == "grad_of_vmap":
        return tt.grad(lambda xs: tt.sum(tt.vmap(f)(xs) * W3)), 1, True
    if kind == "jac_fwd_of_grad":
        return tt.jacobian(tt.grad(f), mode="fwd"), 1, False
    if kind == "jvp":
        return (lambda x, v: tt.jvp(op, (x,), (v,))), 2, False
    if kind == "vjp":
        return (lambda x, v: tt.vjp(lambda y: tt.sum(op(y) * tt.sum(v)), x)[1](1.0)), 2, False
    if kind == "vag_aux":
        return tt.value_and_grad(lambda x: (f(x), op(x)), has_aux=True), 1, False
    raise AssertionError(kind)


def make_gen(fam, nargs, batched):
    def gen(rng, i):
        if batched:
            x = np.stack([fam(rng, i + 7 * k) for k in range(3)])
        else:
            x = fam(rng, i)
        if nargs == 2:
            v = rng.standard_normal(x.shape).astype(x.dtype)
            return (x, v)
        return (x,)
    return gen


EXTRA = ["vmap_hessian", "vmap_jac_rev", "vmap_hvp", "grad_of_vmap", "jac_fwd_of_grad", "jvp",
         "vjp", "vag_aux"]
W3 = np.array([1.0, -2.0, 0.5])


def _cases():
    out = []
    for k, (name, _op, _fam, full) in enumerate(FUNCS):
        kinds = TRANSFORMS if full else [TRANSFORMS[(k + j * 4) % 9] for j in range(2)]
        if full:
            kinds = kinds + [EXTRA[(k + j * 3) % 8] for j in range(1)]
        else:
            kinds = kinds + [EXTRA[k % 8]]
        for j, kind in enumerate(kinds):
            place = ("outer", "inner")[(k + j) % 2]
            out.append((name, kind, place))
    return out


FUNC_BY_NAME = {f[0]: f for f in FUNCS}
_FROZEN = ("frozen-branch: cumprod's derivative rule picks its zero-safe or its division formula "
           "from the recorded input; at second order the choice is replayed (ulp differences, "
           "NaN/inf where eager is finite)")
_NAN = ("nan-bits: second order of F.normalize at the zero vector (hvp, jvp of grad): the "
        "compiled NaN has other bits than eager's")
_ZERO = ("signed-zero: second order through adaptive_max_pool2d with tied windows (hessian, "
         "grad of grad, grad of sum(vmap)) gives -0.0 where eager gives 0.0")
XFAIL = {
    "cumprod-hessian-outer": _FROZEN,
    "cumprod-hvp-inner": _FROZEN,
    "cumprod-jvp_grad-outer": _FROZEN,
    "cumprod-grad_grad-inner": _FROZEN,
    "normalize-hvp-inner": _NAN,
    "normalize-jvp_grad-outer": _NAN,
    "adaptive_max_pool2d-hessian-outer": _ZERO,
    "adaptive_max_pool2d-grad_grad-inner": _ZERO,
    "adaptive_max_pool2d-grad_of_vmap-outer": _ZERO,
}
# fixed since the round was written (equal to eager now): cumprod's rules choose their form through
# on_values at higher orders, a guard under tt.compile
FIXED = {"cumprod-hessian-outer", "cumprod-hvp-inner", "cumprod-jvp_grad-outer", "cumprod-grad_grad-inner",
         # (and, round 41c's fix, pieces of one cotangent written into one array are added to 0.0)
         "adaptive_max_pool2d-hessian-outer", "adaptive_max_pool2d-grad_grad-inner",
         "adaptive_max_pool2d-grad_of_vmap-outer"}
XFAIL = {k: v for k, v in XFAIL.items() if k not in FIXED}
CASES = [
    pytest.param(n, kd, pl, id=f"{n}-{kd}-{pl}",
                 marks=[pytest.mark.xfail(strict=True, reason=XFAIL[f"{n}-{kd}-{pl}"])]
                 if f"{n}-{kd}-{pl}" in XFAIL else [])
    for n, kd, pl in _cases()
]


@pytest.mark.parametrize("name,kind,place", CASES)
def test_compile_matches_eager(name, kind, place):
    _, op, fam, _ = FUNC_BY_NAME[name]
    fn, nargs, batched = build(op, kind)
    if place == "outer":
        compiled = tt.compile(fn)
    else:
        compiled = tt.compile(lambda *a: fn(*a))
    seed = sum(map(ord, name + kind + place))
    n = 42 if seed % 23 == 0 else 12
    check(fn, compiled, make_gen(fam, nargs, batched), n, seed)


# ---------------------------------------------------------------- one number in
# The same elementwise functions of one number: a Python float (a number argument of the
# program) or a 0-d array, under grad, grad of grad, hessian and jvp of grad.
SCALAR_FAMS = (fam_vec, fam_wide, fam_pos, fam_neg, fam_unit, fam_zeros, fam_prob)
SCALAR_NAMES = [f[0] for f in FUNCS[:42] if f[2] in SCALAR_FAMS and "roll" not in f[0]
                and "flip" not in f[0] and "prelu" not in f[0]]
SCALAR_NAMES += [f[0] for f in FUNCS if f[2] in SCALAR_FAMS and f[0] in (
    "gammaln", "gamma", "rgamma", "digamma", "erfinv", "log_ndtr", "xlogy", "entr", "ndtri",
    "logit", "i1", "j0", "y0", "erfc", "polygamma1", "sp_softplus")]
HESS0D = ("0-d type (documented): tt.hessian of a function of one number is a NumPy "
          "float64 eagerly, a 0-d ndarray compiled")
HESS0D_IDS = {
    "num-floor_mul-hessian-array0d",
    "num-trunc_mul-hessian-float",
    "num-sign_mul-hessian-array0d",
    "num-remainder-hessian-float",
    "num-sinc-hessian-float",
    "num-hypot-hessian-array0d",
    "num-logaddexp2-hessian-float",
    "num-F.softplus_thr-hessian-array0d",
    "num-gelu_tanh-hessian-float",
    "num-silu-hessian-array0d",
    "num-expm1_log1p-hessian-array0d",
    "num-arctanh-hessian-float",
    "num-exp2_log2-hessian-array0d",
    "num-gamma-hessian-float",
    "num-digamma-hessian-array0d",
    "num-erfc-hessian-float",
    "num-ndtri-hessian-array0d",
    "num-logit-hessian-float",
    "num-entr-hessian-array0d",
    "num-j0-hessian-float",
    "num-sp_softplus-hessian-array0d",
}
HESS0D_IDS = set()   # fixed since: a result that is a 0-d array eagerly is one compiled too
SKINDS = ["grad", "grad_grad", "hessian", "jvp_grad"]


def _scases():
    out = []
    for k, name in enumerate(SCALAR_NAMES):
        for j in range(2):
            kind = SKINDS[(k + 2 * j) % 4]
            arg = ("float", "array0d")[(k + j) % 2]
            out.append(pytest.param(name, kind, arg, id=f"num-{name}-{kind}-{arg}",
                                    marks=[pytest.mark.xfail(strict=True, reason=HESS0D)]
                                    if f"num-{name}-{kind}-{arg}" in HESS0D_IDS else []))
    return out


def sbuild(op, kind):
    f = (lambda x: tt.sin(op(x)))
    if kind == "grad":
        return tt.grad(f), 1
    if kind == "grad_grad":
        return tt.grad(tt.grad(f)), 1
    if kind == "hessian":
        return tt.hessian(f), 1
    return (lambda x, v: tt.jvp(tt.grad(f), (x,), (v,))), 2


@pytest.mark.parametrize("name,kind,arg", _scases())
def test_compile_matches_eager_one_number(name, kind, arg):
    _, op, fam, _ = FUNC_BY_NAME[name]
    fn, nargs = sbuild(op, kind)
    compiled = tt.compile(fn) if (len(name) + len(kind)) % 2 else tt.compile(lambda *a: fn(*a))

    def gen(rng, i):
        x = fam(rng, i)[i % 4]
        x = float(x) if arg == "float" else np.array(x)
        return (x, 1.0 if arg == "float" else np.array(1.0))[:nargs]
    seed = sum(map(ord, name + kind + arg))
    check(fn, compiled, gen, 12, seed)
