"""Round 28b: piecewise / value-dependent operations x transforms x compile placement.

A fresh JAX user's matrix: every kinked or index-producing operation in the docs (sort,
argsort, topk, max/min with and without an axis, maximum/minimum/fmax, abs, sign, clip/clamp,
where, relu/leaky_relu/elu/hardtanh, floor/round/ceil/trunc, argmax/argmin used as an index,
take_along_axis with computed indices, masked_fill with computed masks, cumsum, a norm at zero,
sqrt near zero, median/quantile, heaviside, remainder, softplus's threshold, smooth-L1/Huber,
max_pool2d, logsumexp) x transforms (none, grad, value_and_grad, jvp, vjp, vmap, vmap(grad),
grad(grad), jvp(grad), hvp, hessian, jacobian rev/fwd) x placement (``outer``:
tt.compile(transform(f)); ``inner``: the transform inside the compiled function; ``helper``:
a compiled helper called inside a compiled function; ``around``: a transform of a function
calling a compiled helper, eagerly). Plus pytree-style code (dict/list/tuple parameters,
has_aux dicts, argnums tuples, SGD loops, per-example gradients), scan-like loops whose length
is an int argument, object-style backward() with the argument's ``.grad`` compared, and
extras (float clip bounds as number arguments, Python branches and int(argmax) guards,
float32, vmap of jvp/hessian, a norm of an exact zero vector, boolean indexing).
Each case builds the same inputs twice from the same seeds and runs 12 calls (some 42) with
kinks, ties, exact zeros (and -0.0), clip crossings and permuted rows moving on every call;
every output, gradient, tangent, aux and ``.grad`` is compared bit for bit (type, dtype,
shape, bytes). A refusal where eager runs would be a failure; none was seen.

708 cases: 640 equal (one of them a documented refusal: boolean indexing, whose shape
depends on the values), 68 strict xfails, no false refusal, when written. All 68 are equal to
eager since (see FIXED_ALL below); the classes as found:

* frozen-index-under-vmap (29): tt.vmap (and vmap(grad)) of a function that sorts or takes
  argsort/argmax indices (sort, -sort(-x), take_along_axis(argsort), x[argsort[:3]],
  x[argmax], take_along_axis(argmax), median, quantile) inside tt.compile replays the indices
  of the recorded batch: wrong values from the second call on (topk, max/min and max_pool under
  vmap are right). Also with a compiled helper, vmap(grad) over pytree parameters and
  vmap(jvp(tt.sort)) (vmap(jvp(relu)) and vmap(hessian(abs)) are right).
* frozen-index-in-jacobian (27): tt.jacobian (rev and fwd) and tt.hessian of the same
  functions inside tt.compile give the recorded permutation (the basis sweep is vmapped), also
  jacobian w.r.t. a pytree leaf.
* frozen-pool-argmax-second-order (5): max_pool2d under forward-over-reverse / reverse-over-
  reverse (grad(grad), jvp(grad), hvp, hessian) inside tt.compile: the window argmax of the
  recorded call is reused (first-order grad, vmap and jacobians of max_pool are right).
* 0d-type (5): a has_aux dict value tt.sum(out > 0) is np.int64 eagerly, a 0-d ndarray
  compiled (value_and_grad and grad with has_aux).
* result-type (2): x[T(x).topk(2).indices.data] * x[:2] on an array argument, where T(x) is
  tt.tensor(x) made inside: eager gives an ndarray, compiled a Tensor (directly and as a
  compiled helper).
"""

import warnings

import numpy as np
import pytest

import tinytensor as tt

F = tt.nn.functional

N = 6


# ----------------------------------------------------------------------------- harness

def _same(a, b, path="out"):
    """Bit-for-bit comparison: type, dtype, shape, bytes; recursive on containers."""
    assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, tt.Tensor):
        _same(np.asarray(a.data), np.asarray(b.data), path + ".data")
        assert a.requires_grad == b.requires_grad, f"{path}: requires_grad differs"
        ga, gb = a.grad, b.grad
        assert (ga is None) == (gb is None), f"{path}.grad: None vs not"
        if ga is not None:
            _same(ga, gb, path + ".grad")
        return
    if isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{path}: shape {a.shape} != {b.shape}"
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), (
            f"{path}: values differ\n eager={a!r}\n compiled={b!r}")
        return
    if isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            _same(a[k], b[k], f"{path}[{k!r}]")
        return
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), f"{path}: len {len(a)} != {len(b)}"
        for k, (u, v) in enumerate(zip(a, b)):
            _same(u, v, f"{path}[{k}]")
        return
    if isinstance(a, float):
        assert np.float64(a).tobytes() == np.float64(b).tobytes(), f"{path}: {a!r} != {b!r}"
        return
    assert a == b, f"{path}: {a!r} != {b!r}"


def _call(fn, args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001
        return "err", e


def run_case(build, make_args, calls=12, allowed_refusal=None):
    """build(compiled: bool) -> callable; make_args(i) -> tuple of fresh arguments."""
    eager_fn = build(False)
    comp_fn = build(True)
    for i in range(calls):
        ea = make_args(i)
        ca = make_args(i)
        ek, eo = _call(eager_fn, ea)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ck, co = _call(comp_fn, ca)
        if ek == "err":
            assert ck == "err", f"call {i}: eager raised {eo!r}, compiled returned"
            assert type(eo) is type(co), f"call {i}: eager {eo!r} compiled {co!r}"
            continue
        if ck == "err":
            if allowed_refusal is not None and allowed_refusal in str(co):
                return
            raise AssertionError(f"call {i}: false refusal / crash: {co!r}") from co
        _same(eo, co, f"call{i}")
        _same(ea, ca, f"call{i}.args")


# ----------------------------------------------------------------------------- inputs

def make_x(seed, i, n=N):
    """A vector whose kinks, ties, zeros and clip crossings move on every call."""
    rng = np.random.default_rng(seed * 1009 + i)
    x = rng.standard_normal(n)
    k = i % 7
    if k == 1:
        x[i % n] = 0.0
        x[(i + 2) % n] = x[(i + 4) % n]
    elif k == 2:
        x = np.round(x * 2) / 2
    elif k == 3:
        x = x * 3.0
    elif k == 4:
        x = -x[::-1].copy()
        x[0] = -0.0
    elif k == 5:
        x = np.where(x > 0, 0.5, -0.5)
        x[i % n] = 0.0
    elif k == 6:
        x = rng.permutation(np.array([2.0, -1.0, 0.25, -0.25, 1.5, 0.0])[:n])
    return np.ascontiguousarray(x, dtype=np.float64)


def make_v(seed, i, n=N):
    return np.random.default_rng(seed * 7919 + i + 1).standard_normal(n)


def make_X(seed, i, b=4, n=N):
    return np.stack([make_x(seed + r, i + 3 * r, n) for r in range(b)])


# ----------------------------------------------------------------------------- operations

def T(x):
    """A Tensor for Tensor-only methods: an ndarray (eagerly or inside compile) is wrapped."""
    return x if hasattr(x, "topk") else tt.tensor(x)


OPS = {
    "sort": lambda x: tt.sort(x),
    "sort_desc": lambda x: -tt.sort(-x),
    "argsort_take": lambda x: tt.take_along_axis(x, tt.argsort(x), axis=0),
    "argsort_index_top3": lambda x: x[tt.argsort(-x)[:3]] * 2.0,
    "topk3": lambda x: T(x).topk(3).values,
    "topk_indices_gather": lambda x: x[T(x).topk(2).indices.data] * x[:2],
    "max_all": lambda x: tt.max(x) * x,
    "min_all": lambda x: tt.min(x) + x * 0.5,
    "max_dim": lambda x: tt.max(x.reshape(2, 3), axis=1),
    "min_dim0": lambda x: tt.min(x.reshape(2, 3), axis=0),
    "max_keepdims_sub": lambda x: x.reshape(3, 2) - tt.max(x.reshape(3, 2), axis=1, keepdims=True),
    "maximum_rev": lambda x: tt.maximum(x, x[::-1]),
    "minimum_zero": lambda x: tt.minimum(x, 0.0),
    "fmax_shift": lambda x: tt.fmax(x, 0.5 - x),
    "abs": lambda x: tt.abs(x),
    "sign_sq": lambda x: tt.sign(x) * x * x,
    "clip": lambda x: tt.clip(x, -0.5, 0.5),
    "clamp_min": lambda x: tt.clamp(x, min=-0.25),
    "hardtanh": lambda x: tt.minimum(tt.maximum(x, -1.0), 1.0),
    "where_gt0": lambda x: tt.where(x > 0, x * x, -x),
    "where_ge_tie": lambda x: tt.where(x >= x[::-1], x, 2.0 * x),
    "relu": lambda x: tt.relu(x),
    "leaky_relu": lambda x: tt.leaky_relu(x, 0.1),
    "elu": lambda x: F.elu(x),
    "floor_mul": lambda x: tt.floor(x * 2.0) * x,
    "round_mul": lambda x: tt.round(x * 2.0) * x,
    "ceil_add": lambda x: tt.ceil(x) + x * x,
    "trunc_mul": lambda x: tt.trunc(x * 1.5) * x,
    "argmax_index": lambda x: x[tt.argmax(x)] * x,
    "argmin_take": lambda x: tt.take(x, tt.argmin(x)) - x,
    "argmax_rows_gather": lambda x: tt.take_along_axis(
        x.reshape(2, 3), tt.argmax(x.reshape(2, 3), axis=1)[:, None], axis=1),
    "masked_fill": lambda x: T(x).masked_fill(T(x).data < 0, 0.0) * x,
    "cumsum_relu": lambda x: tt.cumsum(tt.relu(x)),
    "norm_zero": lambda x: tt.linalg.norm(tt.relu(x - 1.0)) + x,
    "sqrt_relu": lambda x: tt.sqrt(tt.relu(x) + 1e-300),
    "sqrt_sq": lambda x: tt.sqrt(x * x),
    "median": lambda x: tt.median(x) * x,
    "quantile": lambda x: tt.quantile(x, 0.3) + x,
    "heaviside": lambda x: tt.heaviside(x, 0.5) * x,
    "remainder": lambda x: tt.remainder(x, 0.7),
    "softplus_thresh": lambda x: tt.softplus(x * 15.0),
    "smooth_l1": lambda x: F.smooth_l1_loss(x, x[::-1] * 0.5, reduction="none"),
    "huber": lambda x: F.huber_loss(x, np.zeros(N), reduction="none", delta=0.5),
    "max_pool": lambda x: F.max_pool2d(x.reshape(1, 1, 2, 3), 2, stride=1).reshape(-1),
    "logsumexp_max": lambda x: tt.logsumexp(x * 50.0) + x,
}


def _weights(out):
    shape = tuple(out.shape)
    return np.arange(1.0, int(np.prod(shape)) + 1.0).reshape(shape)


def make_loss(op):
    def loss(x):
        out = op(x)
        w = _weights(out)
        return tt.sum(out * w) + 0.25 * tt.sum(out * out * w)
    return loss


def _ct(out):
    shape = tuple(out.shape)
    return np.cos(np.arange(float(np.prod(shape)))).reshape(shape)


# transforms: name -> (builder(op, loss) -> fn, args kind)
def _vjp_fn(op):
    def f(x):
        out, pb = tt.vjp(op, x)
        (g,) = pb(_ct(out))
        return out, g
    return f


TRANSFORMS = {
    "none": (lambda op, loss: op, "x"),
    "loss": (lambda op, loss: loss, "x"),
    "grad": (lambda op, loss: tt.grad(loss), "x"),
    "vag": (lambda op, loss: tt.value_and_grad(loss), "x"),
    "jvp": (lambda op, loss: (lambda x, v: tt.jvp(op, (x,), (v,))), "xv"),
    "vjp": (lambda op, loss: _vjp_fn(op), "x"),
    "vmap": (lambda op, loss: tt.vmap(op), "X"),
    "vmap_grad": (lambda op, loss: tt.vmap(tt.grad(loss)), "X"),
    "grad_grad": (lambda op, loss: tt.grad(lambda x, v: tt.sum(tt.grad(loss)(x) * v)), "xv"),
    "jvp_grad": (lambda op, loss: (lambda x, v: tt.jvp(tt.grad(loss), (x,), (v,))), "xv"),
    "hvp": (lambda op, loss: (lambda x, v: tt.hvp(loss, (x,), (v,))), "xv"),
    "hessian": (lambda op, loss: tt.hessian(loss), "x"),
    "jac_rev": (lambda op, loss: tt.jacobian(op), "x"),
    "jac_fwd": (lambda op, loss: tt.jacobian(op, mode="fwd"), "x"),
}


def _args_maker(kind, seed):
    if kind == "x":
        return lambda i: (make_x(seed, i),)
    if kind == "xv":
        return lambda i: (make_x(seed, i), make_v(seed, i))
    return lambda i: (make_X(seed, i),)


def _builder(opname, trname, placement):
    op = OPS[opname]
    tbuild, _ = TRANSFORMS[trname]

    def build(compiled):
        if not compiled:
            return tbuild(op, make_loss(op))
        if placement == "outer":              # tt.compile(transform(f))
            return tt.compile(tbuild(op, make_loss(op)))
        if placement == "inner":              # the transform runs inside the compiled function
            inner = tbuild(op, make_loss(op))
            return tt.compile(lambda *a: inner(*a))
        cop = tt.compile(op)                  # a compiled helper
        if placement == "around":             # transform of a function calling a compiled helper
            return tbuild(cop, make_loss(cop))
        return tt.compile(tbuild(cop, make_loss(cop)))  # "helper": compiled helper inside compile
    return build


# ----------------------------------------------------------------------------- the matrix

XFAIL = {}   # (op, transform, placement) -> "class: what differs"

_PERM_OPS = ("sort", "sort_desc", "argsort_take", "argsort_index_top3", "argmax_index",
             "argmax_rows_gather", "median", "quantile")
_VMAP_WHY = {
    "vmap": "frozen-index-under-vmap: argsort/argmax indices of the recorded batch replayed",
    "vmap_grad": "frozen-index-under-vmap: per-example gradients scattered to recorded positions",
    "hessian": "frozen-index-in-jacobian: hessian's vmapped basis sweep reuses the recorded order",
    "jac_rev": "frozen-index-in-jacobian: jacrev rows land at the recorded permutation",
    "jac_fwd": "frozen-index-in-jacobian: jacfwd columns land at the recorded permutation",
}
for _op in _PERM_OPS:
    for _tr, _why in _VMAP_WHY.items():
        XFAIL[(_op, _tr, "outer")] = _why
    XFAIL[(_op, "vmap_grad", "inner")] = _VMAP_WHY["vmap_grad"]
    XFAIL[(_op, "hessian", "inner")] = _VMAP_WHY["hessian"]
    XFAIL[(_op, "vmap", "helper")] = _VMAP_WHY["vmap"] + " (compiled helper)"
for _tr, _pl in (("grad_grad", "outer"), ("jvp_grad", "outer"), ("hvp", "outer"),
                 ("hessian", "outer"), ("jvp_grad", "inner"), ("hessian", "inner")):
    XFAIL[("max_pool", _tr, _pl)] = (
        "frozen-pool-argmax-second-order: max_pool2d's window argmax frozen in forward-over-reverse")
for _tr, _pl in (("none", "outer"), ("loss", "outer"), ("none", "helper")):
    XFAIL[("topk_indices_gather", _tr, _pl)] = (
        "result-type: array indexed by topk(...).indices.data of a Tensor made inside: "
        "eager ndarray/float64, compiled Tensor")

# Fixed since the round was written (each now equal to eager): the batching rules compute argsort,
# argmax and the boolean reductions on the Tensor (tt.compile sees them); a create_graph sweep's
# rule giving a plain array, and max_pool2d's window maxima in its rules, are program lines; a
# NumPy sum of a comparison's mask inside a transform is a NumPy scalar; an index array taken with
# .data keeps an array result. XFAIL keeps the reasons as written.
FIXED_ALL = True
XFAIL_WRITTEN, XFAIL = XFAIL, {}

PLACEMENT_TRANSFORMS = {
    "outer": [t for t in TRANSFORMS if t != "loss"],
    "inner": ["grad", "jvp_grad"],
    "helper": ["none", "grad", "vmap"],
    "around": ["grad", "jvp"],
}

CORE_OPS = ("sort", "sort_desc", "argsort_take", "argsort_index_top3", "topk3",
            "topk_indices_gather", "max_all", "max_dim", "maximum_rev", "abs", "clip",
            "where_gt0", "relu", "floor_mul", "round_mul", "argmax_index", "argmax_rows_gather",
            "masked_fill", "norm_zero", "sqrt_relu", "median", "quantile", "max_pool",
            "softplus_thresh")
# outer transforms that run on CORE_OPS only (the others run on every op)
CORE_ONLY = ("vag", "grad_grad", "jvp_grad", "hvp", "jac_rev", "jac_fwd")


def _matrix_params():
    out = []
    for placement, trs in PLACEMENT_TRANSFORMS.items():
        for tr in trs:
            full = placement == "outer" and tr not in CORE_ONLY
            for opname in (OPS if full else CORE_OPS):
                cid = f"{opname}-{tr}-{placement}"
                reason = XFAIL.get((opname, tr, placement))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                out.append(pytest.param(opname, tr, placement, id=cid, marks=marks))
    return out


@pytest.mark.parametrize("opname,trname,placement", _matrix_params())
def test_matrix(opname, trname, placement):
    seed = sum(map(ord, opname + trname)) % 1000
    calls = 42 if (seed % 17 == 0) else 12
    _, kind = TRANSFORMS[trname]
    run_case(_builder(opname, trname, placement), _args_maker(kind, seed), calls=calls)


# ----------------------------------------------------------------------------- pytree-style code

def _params(seed, i):
    rng = np.random.default_rng(seed * 31 + i)
    W = rng.standard_normal((N, 4))
    W[i % N, i % 4] = 0.0
    return {"W": W, "b": np.round(rng.standard_normal(4) * 2) / 2,
            "layers": [rng.standard_normal((4, 4)) * 0.7, rng.standard_normal(4)]}


def _batch(seed, i):
    rng = np.random.default_rng(seed * 131 + i)
    x = rng.standard_normal((5, N))
    x[i % 5] = x[(i + 2) % 5]                       # tied rows
    if i % 3 == 0:
        x = x[rng.permutation(5)]                   # rows permuted
    y = rng.integers(0, 4, 5)
    return np.ascontiguousarray(x), y


def mlp_kinked(p, x):
    h = tt.relu(x @ p["W"] + p["b"])
    h = tt.clip(h @ p["layers"][0], -0.75, 0.75) + p["layers"][1]
    return tt.maximum(h, tt.abs(h) * 0.5)


def loss_kinked(p, x, y):
    out = mlp_kinked(p, x)
    return F.cross_entropy(out, y) + 0.1 * tt.sum(tt.sort(out, axis=1)[:, -1])


def loss_aux(p, x, y):
    out = mlp_kinked(p, x)
    pred = tt.argmax(out, axis=1)
    aux = {"top": tt.max(out, axis=1), "pred": pred, "n_relu": tt.sum(out > 0)}
    return F.cross_entropy(out, y), aux


def scan_loss(p, x, n):
    h = x
    for _ in range(n):
        h = tt.where(h > 0, tt.tanh(h @ p["layers"][0]), h * 0.5)
        h = tt.clip(h, -0.6, 0.6)
    return tt.sum(h * h) + tt.sum(tt.max(h, axis=1))


def _fx_vag(p, x, y):
    return tt.value_and_grad(loss_kinked)(p, x, y)


def _fx_aux(p, x, y):
    return tt.value_and_grad(loss_aux, has_aux=True)(p, x, y)


def _fx_grad_aux(p, x, y):
    return tt.grad(loss_aux, has_aux=True)(p, x, y)


def _fx_argnums(p, x, y):
    return tt.grad(lambda W, b, x: loss_kinked({**p, "W": W, "b": b}, x, y), argnums=(0, 1, 2))(
        p["W"], p["b"], x)


def _fx_sgd(p, x, y):
    val, g = tt.value_and_grad(loss_kinked)(p, x, y)
    new = {"W": p["W"] - 0.1 * g["W"], "b": p["b"] - 0.1 * g["b"],
           "layers": [a - 0.1 * ga for a, ga in zip(p["layers"], g["layers"])]}
    return val, new


def _fx_sgd_loop(p, x, y):
    vals = []
    for _ in range(3):
        val, g = tt.value_and_grad(loss_kinked)(p, x, y)
        p = {"W": p["W"] - 0.5 * g["W"], "b": p["b"] - 0.5 * g["b"], "layers": p["layers"]}
        vals.append(val)
    return vals, p


def _fx_per_example(p, x, y):
    return tt.vmap(tt.grad(lambda p, xi, yi: tt.sum(tt.relu(xi @ p["W"] + p["b"]) * (yi + 1.0))),
                   in_axes=(None, 0, 0))(p, x, y)


def _fx_per_example_sort(p, x, y):
    return tt.vmap(tt.grad(lambda p, xi: tt.sum(tt.sort(xi @ p["W"]) * np.arange(4.0))),
                   in_axes=(None, 0))(p, x)


def _fx_tuple_params(p, x, y):
    tp = (p["W"], (p["b"], p["layers"][0]))
    def lf(tp, x):
        W, (b, L) = tp
        h = tt.leaky_relu(x @ W + b, 0.2)
        return tt.sum(tt.abs(h @ L)) + tt.sum(tt.min(h, axis=0))
    return tt.value_and_grad(lf)(tp, x)


def _fx_argmax_embed(p, x, y):
    def lf(p, x):
        idx = tt.argmax(x @ p["W"], axis=1)
        rows = p["layers"][0][idx]
        return tt.sum(rows * tt.max(x @ p["W"], axis=1)[:, None])
    return tt.value_and_grad(lf)(p, x)


def _fx_topk_gather(p, x, y):
    def lf(p, x):
        s = x @ p["W"]
        top = T(s).topk(2)
        g = tt.take_along_axis(s, top.indices.data, axis=1)
        return tt.sum(g * g) + tt.sum(top.values)
    return tt.value_and_grad(lf)(p, x)


def _fx_masked(p, x, y):
    def lf(p, x):
        s = T(x @ p["W"])
        return tt.sum(s.masked_fill(s.data < 0.1, -1.0) * p["b"])
    return tt.grad(lf)(p, x)


def _fx_clip_bounds(p, x, y):
    lo, hi = p["b"][:1] - 1.0, p["b"][1:2] + 1.0
    return tt.grad(lambda x, lo, hi: tt.sum(tt.clip(x @ p["W"], lo, hi) ** 2),
                   argnums=(0, 1, 2))(x, lo, hi)


def _fx_hvp_params(p, x, y):
    return tt.hvp(lambda W: loss_kinked({**p, "W": W}, x, y), (p["W"],), (np.ones_like(p["W"]),))


def _fx_jvp_grad_params(p, x, y):
    return tt.jvp(tt.grad(lambda W: loss_kinked({**p, "W": W}, x, y)), (p["W"],),
                  (np.ones_like(p["W"]),))


def _fx_hessian_b(p, x, y):
    return tt.hessian(lambda b: loss_kinked({**p, "b": b}, x, y))(p["b"])


def _fx_jac_sort(p, x, y):
    return tt.jacobian(lambda b: tt.sort(x[0] @ p["W"] + b))(p["b"])


FX = {
    "vag": _fx_vag, "aux_dict": _fx_aux, "grad_aux": _fx_grad_aux, "argnums3": _fx_argnums,
    "sgd": _fx_sgd, "sgd_loop": _fx_sgd_loop, "per_example_relu": _fx_per_example,
    "per_example_sort": _fx_per_example_sort, "tuple_params": _fx_tuple_params,
    "argmax_embed": _fx_argmax_embed, "topk_gather": _fx_topk_gather, "masked": _fx_masked,
    "clip_bounds": _fx_clip_bounds, "hvp_params": _fx_hvp_params,
    "jvp_grad_params": _fx_jvp_grad_params, "hessian_b": _fx_hessian_b, "jac_sort": _fx_jac_sort,
}

FX_LONG = ("vag", "aux_dict", "sgd_loop", "per_example_sort", "argmax_embed", "topk_gather",
           "clip_bounds", "hessian_b", "jac_sort")   # these also run 42 calls
FX_XFAIL = {}
for _pl in ("outer", "inner"):
    FX_XFAIL[("aux_dict", _pl)] = ("0d-type: has_aux count tt.sum(out > 0): eager np.int64, "
                                   "compiled 0-d ndarray")
    FX_XFAIL[("grad_aux", _pl)] = FX_XFAIL[("aux_dict", _pl)]
    FX_XFAIL[("per_example_sort", _pl)] = (
        "frozen-index-under-vmap: vmap(grad) through tt.sort scatters to the recorded order")
    FX_XFAIL[("jac_sort", _pl)] = (
        "frozen-index-in-jacobian: jacobian of tt.sort w.r.t. a pytree leaf: recorded permutation")


FX_XFAIL_WRITTEN, FX_XFAIL = FX_XFAIL, {}     # fixed since (see FIXED_ALL)


def _fx_params():
    out = []
    for name in FX:
        runs = (("outer", 12), ("inner", 12)) + ((("outer", 42),) if name in FX_LONG else ())
        for placement, calls in runs:
            reason = FX_XFAIL.get((name, placement, calls)) or FX_XFAIL.get((name, placement))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(name, placement, calls, id=f"{name}-{placement}-{calls}",
                                    marks=marks))
    return out


@pytest.mark.parametrize("name,placement,calls", _fx_params())
def test_pytree(name, placement, calls):
    f = FX[name]
    seed = sum(map(ord, name)) + calls

    def build(compiled):
        if not compiled:
            return f
        if placement == "outer":
            return tt.compile(f)
        return tt.compile(lambda p, x, y: f(p, x, y))

    def make(i):
        x, y = _batch(seed, i)
        return _params(seed, i), x, y

    run_case(build, make, calls=calls)


SCAN_XFAIL = {}


@pytest.mark.parametrize("mode", ["value", "grad", "vag_n_changes", "vmap_grad"])
def test_scan_int_length(mode):
    seed = 5

    def f(p, x, n):
        if mode == "value":
            return scan_loss(p, x, n)
        if mode == "vmap_grad":
            return tt.vmap(tt.grad(lambda p, xi: scan_loss(p, xi[None], n)), in_axes=(None, 0))(p, x)
        return tt.value_and_grad(scan_loss)(p, x, n)

    def make(i):
        x, _ = _batch(seed, i)
        n = 2 if mode != "vag_n_changes" else 1 + i % 4
        return _params(seed, i), x, n

    run_case(lambda c: tt.compile(f) if c else f, make, calls=12)


@pytest.mark.parametrize("op", ["relu", "clip", "sort", "max_dim", "abs", "where_gt0", "argmax_index",
                                "median", "floor_mul", "max_pool"])
def test_backward_grad_written(op):
    """Object style: a Tensor argument that requires grad, backward() inside, .grad compared."""
    fop = OPS[op]
    loss = make_loss(fop)

    def f(xt):
        v = loss(xt)
        v.backward()
        return v

    def make(i):
        return (tt.tensor(make_x(11, i), requires_grad=True),)

    run_case(lambda c: tt.compile(f) if c else f, make, calls=12)


# ----------------------------------------------------------------------------- extra patterns

def _ex_float_bounds(x, c):
    return tt.grad(lambda x: tt.sum(tt.clip(x, -c, c) * np.arange(1.0, N + 1)))(x)


def _ex_python_branch(x, c):
    m = tt.max(x)
    y = x * 2.0 if float(m) > 1.0 else tt.abs(x)
    return y, tt.grad(lambda x: tt.sum(tt.relu(x) * x))(x)


def _ex_int_argmax(x, c):
    k = int(tt.argmax(x))
    return x[k] * x, tt.grad(lambda x: x[int(tt.argmin(x))] * tt.sum(x))(x)


def _ex_bool_index(x, c):
    return tt.sum(x[x > 0])


def _ex_vmap_jvp(x, c):
    X = tt.stack([x, -x, x[::-1]])
    return tt.vmap(lambda u, v: tt.jvp(tt.relu, (u,), (v,)))(X, X * c)


def _ex_vmap_jvp_sort(x, c):
    X = tt.stack([x, -x, x[::-1]])
    return tt.vmap(lambda u, v: tt.jvp(tt.sort, (u,), (v,)))(X, X * c)


def _ex_vmap_hessian_abs(x, c):
    X = tt.stack([x, -x])
    return tt.vmap(tt.hessian(lambda u: tt.sum(tt.abs(u) * u * u)))(X)


def _ex_float32(x, c):
    x32 = x.astype(np.float32)
    return tt.value_and_grad(lambda u: tt.sum(tt.clip(u, -0.5, 0.5) * tt.floor(u * 2) + tt.relu(u)))(x32)


def _ex_where_scalar_arg(x, c):
    return tt.value_and_grad(lambda u: tt.sum(tt.where(u > c - 1.0, u * c, u)))(x)


def _ex_grad_max_ties_2d(x, c):
    return tt.grad(lambda u: tt.sum(tt.max(u.reshape(3, 2), axis=0) * c))(np.round(x))


def _ex_norm_exact_zero(x, c):
    z = x * 0.0 if c > 1.5 else x
    return tt.value_and_grad(lambda u: tt.linalg.norm(u))(z)


def _ex_cumsum_sort(x, c):
    return tt.jvp(lambda u: tt.cumsum(tt.sort(u)), (x,), (np.arange(float(N)),))


EX = {
    "float_clip_bounds": _ex_float_bounds, "python_branch": _ex_python_branch,
    "int_argmax": _ex_int_argmax, "bool_index": _ex_bool_index, "vmap_jvp_relu": _ex_vmap_jvp,
    "vmap_jvp_sort": _ex_vmap_jvp_sort, "vmap_hessian_abs": _ex_vmap_hessian_abs,
    "float32_mix": _ex_float32, "where_number_arg": _ex_where_scalar_arg,
    "max_ties_2d": _ex_grad_max_ties_2d, "norm_exact_zero": _ex_norm_exact_zero,
    "cumsum_sort_jvp": _ex_cumsum_sort,
}
EX_REFUSAL = {"bool_index": "shape"}   # documented: results whose shape depends on values
EX_XFAIL = {"vmap_jvp_sort": "frozen-index-under-vmap: vmap(jvp(tt.sort)) inside compile: "
                             "primal and tangent in the recorded order"}
EX_XFAIL_WRITTEN, EX_XFAIL = EX_XFAIL, {}     # fixed since (see FIXED_ALL)


def _ex_params():
    out = []
    for name in EX:
        for calls in (12, 42):
            reason = EX_XFAIL.get(name)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(name, calls, id=f"{name}-{calls}", marks=marks))
    return out


@pytest.mark.parametrize("name,calls", _ex_params())
def test_extra(name, calls):
    f = EX[name]
    seed = sum(map(ord, name)) + calls

    def make(i):
        return make_x(seed, i), float(0.25 + (i * 0.37) % 2.0)

    run_case(lambda c: tt.compile(f) if c else f, make, calls=calls,
             allowed_refusal=EX_REFUSAL.get(name))
