"""Round 27b: compiled functions composed with the rest of the library.

464 cases, each built twice from the same seeds (tt.manual_seed, np.random.seed, random.seed,
local Generators), run eagerly and through tt.compile for 12 calls (long cases: 42), with the
same outside changes before the 3rd, 10th and 40th calls (shapes, large/tiny values, dtypes,
train/eval, hyperparameters, edited modules). After every call the result, parameters, their
.grad, buffers (state_dict), optimizer and scheduler state and the tinytensor/NumPy/`random`
generator states are compared bit for bit (type, dtype, shape, bytes).

Sections: (a) transforms inside compile, kinked ops (abs, relu, max, sort, clip, maximum,
where, leaky_relu) under nested transforms (hvp, vmap, vmap(grad), vmap(hessian), jvp(grad),
vmap(jvp)), (grad, value_and_grad with has_aux, hessian, jvp, vjp,
hvp, jacobian rev, vmap(grad), compiled helpers and grad of a compiled helper inside compile) and
transforms of a compiled function; (b) conv/pool/norm/recurrent/dropout/embedding/attention
layers in four styles (forward, whole step, tape entry + outside step, no_grad forward) with
modes toggled, modules edited between calls (Sequential items, append, load_state_dict,
Module.apply, requires_grad_, .to(), hooks, tied weights), grad-mode contexts; (c) every
optimizer with every scheduler, param groups added, hyperparameters changed, accumulation,
zero_grad(set_to_none=False); (d) tt.scipy special functions, linalg and odeint with arguments
moved to hard points.

455 equal, 9 strict xfails when written; the 8 silent ones are fixed since (FIXED):

silent difference (8, fixed)
  * test_transform_inside_compile[compile_hvp-where]: tt.hvp of a function using
    tt.where(x > 0, ...) inside tt.compile replays the recorded branch mask; H v differs from
    eager's on the 2nd call (same shape, new values).
  * test_transform_inside_compile[compile_vmap_grad-maxsort]: tt.vmap(tt.grad(f)) with
    tt.sort(...)[:, 0] inside tt.compile freezes the sort permutation; per-example gradients
    are call 1's on every later call.
  * test_kinked_ops_under_nested_transforms[vmap-sort], [vmap_grad-sort],
    [vmap_hessian-sort], [vmap_jvp-sort]: the same frozen permutation of tt.sort under every
    vmap'd transform inside compile (plain vmap too: values sorted in call 1's order).
  * test_kinked_ops_under_nested_transforms[hvp-where], [jvp_of_grad-where]: forward mode over
    tt.where's VJP (hvp, jvp of grad) inside compile keeps the recorded mask (hessian and
    plain jvp/grad of the same function are equal).

false refusal (1)
  * test_vjp_cotangent_made_with_asarray_literal: a vjp cotangent built from a literal,
    np.asarray(1.5, dtype=x.dtype), is refused as "asarray(...) in a function that holds
    NumPy arrays computed from traced values"; eager runs (a Python float cotangent works).
"""

import random
import types
import warnings

import numpy as np
import pytest

import tinytensor as tt

nn = tt.nn
F = tt.nn.functional
optim = tt.optim
sched_mod = tt.optim.lr_scheduler
special = tt.scipy.special
slinalg = tt.scipy.linalg
odeint = tt.scipy.integrate.odeint


# --------------------------------------------------------------------------------------------
# harness
# --------------------------------------------------------------------------------------------

def canon(x, depth=0):
    """A bit-for-bit comparable description of a value: type, dtype, shape and bytes."""
    if depth > 12:
        return ("deep",)
    if isinstance(x, tt.Tensor):
        d = np.asarray(x.data)
        return ("Tensor", str(d.dtype), d.shape, d.tobytes(), bool(x.requires_grad))
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return ("objarray", x.shape, tuple(canon(v, depth + 1) for v in x.ravel()))
        return ("ndarray", str(x.dtype), x.shape, np.ascontiguousarray(x).tobytes())
    if isinstance(x, np.generic):
        return ("npscalar", type(x).__name__, np.asarray(x).tobytes())
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return (type(x).__name__, x)
    if isinstance(x, float):
        return ("float", x.hex())
    if isinstance(x, int):
        return ("int", x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("namedtuple", type(x).__name__, tuple(canon(v, depth + 1) for v in x))
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(canon(v, depth + 1) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((repr(k), canon(v, depth + 1)) for k, v in x.items()))
    if callable(x):
        return ("callable",)
    return ("other", type(x).__name__)


def global_state():
    return (canon(tt.get_rng_state()), canon(np.random.get_state()[1]), np.random.get_state()[2],
            hash(random.getstate()))


def seed_all():
    tt.manual_seed(1234)
    np.random.seed(4321)
    random.seed(99)


def run_copy(build, n, compiled):
    seed_all()
    env = build()
    f = tt.compile(env.f) if compiled else env.f
    env.fc = f
    out = []
    for i in range(1, n + 1):
        change = getattr(env, "change", None)
        if change is not None:
            change(i)
        args = env.args(i)
        kwargs = env.kwargs(i) if hasattr(env, "kwargs") else {}
        ctx = env.ctx(i) if hasattr(env, "ctx") else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if ctx is not None:
                    with ctx:
                        r = f(*args, **kwargs)
                else:
                    r = f(*args, **kwargs)
                rec = ("ok", canon(r))
                post = getattr(env, "post", None)
                if post is not None:
                    rec = rec + (canon(post(i, r)),)
            except Exception as e:  # noqa: BLE001 - compared against eager's
                rec = ("raise", type(e).__name__, str(e)[:400])
        snap = env.snap() if hasattr(env, "snap") else None
        out.append((i, rec, canon(snap), global_state()))
    return out


def is_refusal(rec):
    return rec[0] == "raise" and rec[1] == "RuntimeError" and "tt.compile" in rec[2]


def check(build, n=12, expect="equal"):
    eager = run_copy(build, n, False)
    comp = run_copy(build, n, True)
    if expect == "refuse":
        first = comp[0][1]
        assert is_refusal(first), f"expected a documented refusal, got {first[:2]}"
        return
    for (i, er, es, eg), (_, cr, cs, cg) in zip(eager, comp):
        if is_refusal(cr) and not is_refusal(er):
            raise AssertionError(f"call {i}: false refusal: {cr[2][:300]}")
        assert er == cr, f"call {i}: result differs: eager {str(er)[:300]} compiled {str(cr)[:300]}"
        assert es == cs, f"call {i}: state (params/grads/buffers/optimizer) differs"
        assert eg == cg, f"call {i}: generator state differs"


def E(**kw):
    return types.SimpleNamespace(**kw)


def xf(reason):
    return pytest.mark.xfail(strict=True, reason=reason)


# --------------------------------------------------------------------------------------------
# (a) transforms around and inside compile
# --------------------------------------------------------------------------------------------

W_T = np.random.default_rng(7).standard_normal((3, 2))


def _x_for(i, rng, n_long=False):
    m = 4 if i < 3 else 5                   # a new shape on the 3rd call
    x = rng.standard_normal((m, 3))
    if i >= 10:
        x = x * 30.0                         # large values from the 10th call
    if i >= 40:
        x = x.astype(np.float32)             # another dtype on the 40th
    return x


def fn_sin_cube(x):
    return tt.sum(tt.sin(x) * x ** 3)


def fn_lse(x):
    return tt.logsumexp(x * 0.5, axis=None) if False else tt.sum(tt.logsumexp(x, axis=1))


def fn_tanh_mat(x):
    return tt.sum(tt.tanh(x @ W_T))


def fn_branch(x):
    s = tt.sum(x)
    if float(s) > 0:
        return tt.sum(tt.exp(-tt.square(x)))
    return tt.sum(tt.sin(x) ** 2)


def fn_where(x):
    return tt.sum(tt.where(x > 0, tt.sqrt(tt.abs(x) + 1.0), tt.exp(x)))


def fn_softplus(x):
    return tt.sum(tt.softplus(x * 3.0) - tt.sigmoid(x))


def fn_max_sort(x):
    return tt.sum(tt.max(x, axis=1) * 2.0) + tt.sum(tt.sort(x, axis=1)[:, 0])


def fn_norm(x):
    return tt.linalg.norm(x) + tt.sum(tt.square(x)) * 0.1


def fn_softmax_ce(x):
    y = np.arange(x.shape[0]) % 3
    return tt.softmax_cross_entropy(x, y)


def fn_cumsum(x):
    return tt.sum(tt.cumsum(tt.tanh(x), axis=1) ** 2)


TRANSFORM_FUNCS = {
    "sincube": fn_sin_cube, "lse": fn_lse, "tanhmat": fn_tanh_mat, "branch": fn_branch,
    "where": fn_where, "softplus": fn_softplus, "maxsort": fn_max_sort, "norm": fn_norm,
    "softmaxce": fn_softmax_ce, "cumsum": fn_cumsum,
}


def _v_like(x):
    return np.linspace(-1.0, 1.0, x.size).reshape(x.shape).astype(x.dtype)


def build_transform_case(fname, wname):
    base = TRANSFORM_FUNCS[fname]

    def build():
        rng = np.random.default_rng(11)
        env = E()
        env.args = lambda i: (_x_for(i, rng),)
        if wname == "compile_grad":
            env.f = tt.grad(base)
        elif wname == "compile_vag":
            env.f = tt.value_and_grad(base)
        elif wname == "compile_hessian":
            env.f = tt.hessian(base)
        elif wname == "compile_jvp":
            env.f = lambda x: tt.jvp(base, (x,), (_v_like(x),))
        elif wname == "compile_vjp":
            def f(x):
                out, pb = tt.vjp(base, x)
                return out, pb(1.5)
            env.f = f
        elif wname == "compile_hvp":
            env.f = lambda x: tt.hvp(base, (x,), (_v_like(x),))
        elif wname == "compile_jac_grad":
            env.f = tt.jacobian(tt.grad(base))
        elif wname == "compile_jac_fwd":
            env.f = tt.jacobian(tt.grad(base), mode="fwd")
        elif wname == "compile_vmap_grad":
            env.f = tt.vmap(tt.grad(lambda r: base(r[None, :])))
        elif wname == "compile_of_compiled_inner":
            inner = tt.compile(base)
            env.f = lambda x: inner(x) * 2.0 + tt.sum(x)
        elif wname == "compile_grad_of_compiled":
            inner = tt.compile(base)
            env.f = tt.grad(lambda x: inner(x) * 3.0)
        elif wname == "compile_vag_aux":
            env.f = tt.value_and_grad(lambda x: (base(x), {"m": tt.mean(x), "n": x.shape[0]}),
                                      has_aux=True)
        else:
            raise AssertionError(wname)
        return env

    return build


TRANSFORM_WRAPS = ["compile_grad", "compile_vag", "compile_hessian", "compile_jvp", "compile_vjp",
                   "compile_hvp", "compile_jac_grad", "compile_vmap_grad",
                   "compile_of_compiled_inner", "compile_grad_of_compiled"]
OUTER_WRAPS = ["grad", "value_and_grad", "hessian", "jvp", "vjp", "vmap_grad"]


def check_outer(fname, wname, n=12):
    """Run transform(f) eagerly and transform(tt.compile(f)) and compare each call."""
    base = TRANSFORM_FUNCS[fname]

    def make(g):
        if wname == "grad":
            return tt.grad(g)
        if wname == "value_and_grad":
            return tt.value_and_grad(g)
        if wname == "hessian":
            return tt.hessian(g)
        if wname == "jvp":
            return lambda x: tt.jvp(g, (x,), (_v_like(x),))
        if wname == "vjp":
            def h(x):
                out, pb = tt.vjp(g, x)
                return out, pb(np.asarray(0.75, dtype=x.dtype))
            return h
        if wname == "vmap_grad":
            return tt.vmap(tt.grad(lambda r: g(r[None, :])))
        raise AssertionError(wname)

    outs = []
    for compiled in (False, True):
        seed_all()
        rng = np.random.default_rng(13)
        g = tt.compile(base) if compiled else base
        h = make(g)
        seq = []
        for i in range(1, n + 1):
            x = _x_for(i, rng)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    seq.append(("ok", canon(h(x))))
            except Exception as e:  # noqa: BLE001
                seq.append(("raise", type(e).__name__, str(e)[:300]))
            seq.append(global_state())
        outs.append(seq)
    for k, (a, b) in enumerate(zip(*outs)):
        assert a == b, f"step {k // 2 + 1}: {str(a)[:300]} != {str(b)[:300]}"


TRANSFORM_XFAIL = {
    "compile_hvp-where": "silent: tt.hvp of tt.where(x > 0, ...) inside compile replays the recorded "
                         "mask: H v differs from eager's from the 2nd call (same shape, new values)",
    "compile_vmap_grad-maxsort": "silent: tt.vmap(tt.grad(...)) of tt.sort(...)[:, 0] inside compile freezes "
                                 "the sort permutation: per-example gradients from call 1 on every call",
}
OUTER_XFAIL = {}
# fixed since the round was written (equal to eager now): tt.sort's order under vmap is computed
# on the Tensor (batching rules no longer read .data), and a create_graph sweep's rule giving a
# plain array (tt.where's VJP on its raw condition) is a line of the program
FIXED = {"compile_hvp-where", "compile_vmap_grad-maxsort", "vmap-sort", "vmap_grad-sort",
         "vmap_hessian-sort", "vmap_jvp-sort", "hvp-where", "jvp_of_grad-where"}
TRANSFORM_XFAIL = {k: v for k, v in TRANSFORM_XFAIL.items() if k not in FIXED}

transform_params = []
for _fn in TRANSFORM_FUNCS:
    for _w in TRANSFORM_WRAPS:
        _id = f"{_w}-{_fn}"
        marks = [xf(TRANSFORM_XFAIL[_id])] if _id in TRANSFORM_XFAIL else []
        transform_params.append(pytest.param(_fn, _w, id=_id, marks=marks))


@pytest.mark.parametrize("fname,wname", transform_params)
def test_transform_inside_compile(fname, wname):
    check(build_transform_case(fname, wname), n=12)


outer_params = []
for _fn in ["sincube", "tanhmat", "branch", "where", "maxsort", "softmaxce"]:
    for _w in OUTER_WRAPS:
        _id = f"{_w}_of_compiled-{_fn}"
        marks = [xf(OUTER_XFAIL[_id])] if _id in OUTER_XFAIL else []
        outer_params.append(pytest.param(_fn, _w, id=_id, marks=marks))


@pytest.mark.parametrize("fname,wname", outer_params)
def test_transform_of_compiled(fname, wname):
    check_outer(fname, wname)


def test_vjp_cotangent_made_with_asarray_literal():      # (a false refusal when written: fixed)
    """A cotangent built from a literal, `np.asarray(1.5, dtype=x.dtype)`, inside f."""
    base = fn_sin_cube

    def build():
        rng = np.random.default_rng(11)

        def f(x):
            out, pb = tt.vjp(base, x)
            return out, pb(np.asarray(1.5, dtype=x.dtype))
        return E(f=f, args=lambda i: (_x_for(i, rng),))
    check(build)


# --------------------------------------------------------------------------------------------
# (b) nn layers: modes toggled at calls 3, 10 and 40; three styles of step
# --------------------------------------------------------------------------------------------

class PickFirst(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        out = self.inner(x)
        return out[0] if isinstance(out, tuple) else out


class SelfAttn(nn.Module):
    def __init__(self, mha):
        super().__init__()
        self.mha = mha

    def forward(self, x):
        return self.mha(x, x, x)[0]


def _img(n, c, h, rng):
    return rng.standard_normal((n, c, h, h)).astype(np.float32)


LAYERS = {
    "conv1d": (lambda: nn.Conv1d(2, 3, 3, padding=1, rng=0),
               lambda n, r: r.standard_normal((n, 2, 8)).astype(np.float32)),
    "conv2d_maxpool": (lambda: nn.Sequential(nn.Conv2d(1, 3, 3, padding=1, rng=0), nn.ReLU(),
                                             nn.MaxPool2d(2)), lambda n, r: _img(n, 1, 6, r)),
    "convT2d": (lambda: nn.ConvTranspose2d(2, 2, 3, stride=2, rng=0), lambda n, r: _img(n, 2, 3, r)),
    "avgpool": (lambda: nn.Sequential(nn.Conv2d(1, 2, 3, rng=0), nn.AvgPool2d(2)),
                lambda n, r: _img(n, 1, 6, r)),
    "adaptive_avg": (lambda: nn.Sequential(nn.Conv2d(1, 2, 3, rng=0), nn.AdaptiveAvgPool2d(2)),
                     lambda n, r: _img(n, 1, 7, r)),
    "adaptive_max": (lambda: nn.Sequential(nn.Conv2d(1, 2, 3, rng=0), nn.AdaptiveMaxPool2d(2)),
                     lambda n, r: _img(n, 1, 7, r)),
    "bn1d": (lambda: nn.Sequential(nn.Linear(3, 4, rng=0), nn.BatchNorm1d(4)),
             lambda n, r: r.standard_normal((n, 3)).astype(np.float32)),
    "bn1d_cumavg": (lambda: nn.Sequential(nn.Linear(3, 4, rng=0), nn.BatchNorm1d(4, momentum=None)),
                    lambda n, r: r.standard_normal((n, 3)).astype(np.float32)),
    "bn2d": (lambda: nn.Sequential(nn.Conv2d(1, 2, 3, rng=0), nn.BatchNorm2d(2)),
             lambda n, r: _img(n, 1, 5, r)),
    "layernorm": (lambda: nn.Sequential(nn.Linear(3, 4, rng=0), nn.LayerNorm(4)),
                  lambda n, r: r.standard_normal((n, 3)).astype(np.float32)),
    "groupnorm": (lambda: nn.Sequential(nn.Conv2d(1, 4, 3, rng=0), nn.GroupNorm(2, 4)),
                  lambda n, r: _img(n, 1, 5, r)),
    "instnorm_running": (lambda: nn.InstanceNorm1d(2, affine=True, track_running_stats=True),
                         lambda n, r: r.standard_normal((n, 2, 5)).astype(np.float32)),
    "rmsnorm": (lambda: nn.Sequential(nn.Linear(3, 4, rng=0), nn.RMSNorm(4)),
                lambda n, r: r.standard_normal((n, 3)).astype(np.float32)),
    "rnn": (lambda: PickFirst(nn.RNN(3, 4)),
            lambda n, r: r.standard_normal((5, n, 3)).astype(np.float32)),
    "gru": (lambda: PickFirst(nn.GRU(3, 4, batch_first=True)),
            lambda n, r: r.standard_normal((n, 5, 3)).astype(np.float32)),
    "lstm": (lambda: PickFirst(nn.LSTM(3, 4)),
             lambda n, r: r.standard_normal((5, n, 3)).astype(np.float32)),
    "lstm_bi2_dropout": (lambda: PickFirst(nn.LSTM(3, 4, num_layers=2, dropout=0.3, bidirectional=True)),
                         lambda n, r: r.standard_normal((5, n, 3)).astype(np.float32)),
    "lstmcell": (lambda: PickFirst(nn.LSTMCell(3, 4)),
                 lambda n, r: r.standard_normal((n, 3)).astype(np.float32)),
    "grucell": (lambda: nn.GRUCell(3, 4), lambda n, r: r.standard_normal((n, 3)).astype(np.float32)),
    "dropout_global": (lambda: nn.Sequential(nn.Linear(3, 4, rng=0), nn.Dropout(0.3)),
                       lambda n, r: r.standard_normal((n, 3)).astype(np.float32)),
    "dropout_own_rng": (lambda: nn.Sequential(nn.Linear(3, 4, rng=0), nn.Dropout(0.3, rng=7)),
                        lambda n, r: r.standard_normal((n, 3)).astype(np.float32)),
    "dropout2d": (lambda: nn.Sequential(nn.Conv2d(1, 4, 3, rng=0), nn.Dropout2d(0.5)),
                  lambda n, r: _img(n, 1, 5, r)),
    "embedding_pad": (lambda: nn.Embedding(6, 3, padding_idx=0, rng=0),
                      lambda n, r: r.integers(0, 6, (n, 4))),
    "mha_dropout": (lambda: SelfAttn(nn.MultiheadAttention(4, 2, dropout=0.2, batch_first=True)),
                    lambda n, r: r.standard_normal((n, 3, 4)).astype(np.float32)),
    "encoder_layer": (lambda: nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.1,
                                                         batch_first=True, rng=0),
                      lambda n, r: r.standard_normal((n, 3, 4)).astype(np.float32)),
    "prelu_gelu": (lambda: nn.Sequential(nn.Linear(3, 4, rng=0), nn.PReLU(), nn.GELU()),
                   lambda n, r: r.standard_normal((n, 3)).astype(np.float32)),
    "upsample": (lambda: nn.Sequential(nn.Conv2d(1, 2, 3, rng=0), nn.Upsample(scale_factor=2)),
                 lambda n, r: _img(n, 1, 5, r)),
}


def model_snap(model, opt=None):
    d = {"sd": model.state_dict(),
         "grads": [p.grad for p in model.parameters()],
         "training": [m.training for m in model.modules()] if hasattr(model, "modules") else None}
    if opt is not None:
        d["opt"] = opt.state_dict()
    return d


def toggle_mode(model, i):
    if i == 3:
        model.eval()
    elif i == 10:
        model.train()
    elif i == 40:
        model.eval()


def build_layer_case(lname, style):
    make_model, make_x = LAYERS[lname]

    def build():
        tt.manual_seed(5)
        rng = np.random.default_rng(21)
        model = make_model()
        model.train()
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        env = E()

        def args(i):
            n = 4 if i < 10 else 6               # batch size changes on the 10th call
            return (make_x(n, rng),)

        env.args = args

        def change(i):
            toggle_mode(model, i)
        env.change = change

        def lossf(out):
            return tt.mean(tt.square(out))

        if style == "forward":
            env.f = lambda x: model(x)
        elif style == "step":
            def step(x):
                opt.zero_grad()
                loss = lossf(model(x))
                loss.backward()
                opt.step()
                return loss
            env.f = step
        elif style == "tape":
            env.f = lambda x: lossf(model(x))

            def post(i, r):
                r.backward()
                opt.step()
                opt.zero_grad()
                return None
            env.post = post
        elif style == "nograd_forward":
            def fwd(x):
                with tt.no_grad():
                    return model(x)
            env.f = fwd
        else:
            raise AssertionError(style)
        env.snap = lambda: model_snap(model, opt)
        return env

    return build


LAYER_XFAIL = {}
layer_params = []
for _ln in LAYERS:
    for _st in ["forward", "step", "tape", "nograd_forward"]:
        if _st == "nograd_forward" and _ln not in ("bn1d", "bn2d", "dropout_global", "lstm_bi2_dropout",
                                                     "instnorm_running", "mha_dropout"):
            continue
        _id = f"{_st}-{_ln}"
        _long = _ln in ("bn1d", "dropout_global") and _st == "step"
        marks = [xf(LAYER_XFAIL[_id])] if _id in LAYER_XFAIL else []
        layer_params.append(pytest.param(_ln, _st, 42 if _long else 12, id=_id, marks=marks))


@pytest.mark.parametrize("lname,style,n", layer_params)
def test_layer_modes(lname, style, n):
    check(build_layer_case(lname, style), n=n)


# ---- modules edited between calls --------------------------------------------------------

def _mlp():
    return nn.Sequential(nn.Linear(3, 5, rng=0, dtype=np.float64), nn.Tanh(),
                         nn.Linear(5, 2, rng=1, dtype=np.float64))


def _step_env(model, opt, rng, lossf=None):
    env = E()
    lossf = lossf or (lambda out: tt.mean(tt.square(out - 0.5)))

    def step(x):
        opt.zero_grad()
        loss = lossf(model(x))
        loss.backward()
        opt.step()
        return loss
    env.f = step
    env.args = lambda i: (rng.standard_normal((4, 3)),)
    env.snap = lambda: model_snap(model, opt)
    return env


def edit_build(kind):
    def build():
        rng = np.random.default_rng(31)
        model = _mlp()
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
        env = _step_env(model, opt, rng)
        saved = {}

        if kind == "seq_replace_activation":
            def change(i):
                if i == 3:
                    setattr(model, "1", nn.Sigmoid())
                elif i == 10:
                    setattr(model, "1", nn.ReLU())
                elif i == 40:
                    setattr(model, "1", nn.GELU())
        elif kind == "seq_append_layer":
            def change(i):
                if i == 3:
                    model.append(nn.Tanh())
                elif i == 10:
                    model.append(nn.Linear(2, 2, rng=3, dtype=np.float64))
        elif kind == "load_state_dict_back":
            def change(i):
                if i == 2:
                    saved["sd"] = {k: np.array(v) for k, v in model.state_dict().items()}
                if i in (3, 10, 40):
                    model.load_state_dict(saved["sd"])
        elif kind == "opt_load_state_dict_back":
            def change(i):
                if i == 2:
                    saved["o"] = opt.state_dict()
                    saved["sd"] = {k: np.array(v) for k, v in model.state_dict().items()}
                if i in (3, 10):
                    model.load_state_dict(saved["sd"])
                    opt.load_state_dict(saved["o"])
        elif kind == "apply_reinit":
            def init(m):
                if isinstance(m, nn.Linear):
                    m.weight.data[...] = 0.1
                    m.bias.data[...] = -0.05
            def change(i):
                if i in (3, 10):
                    model.apply(init)
        elif kind == "apply_rebind_data":
            def init(m):
                if isinstance(m, nn.Linear):
                    m.weight.data = np.full_like(m.weight.data, 0.2)
            def change(i):
                if i in (3, 10):
                    model.apply(init)
        elif kind == "freeze_first":
            def change(i):
                if i == 3:
                    model[0].requires_grad_(False)
                elif i == 10:
                    model[0].requires_grad_(True)
        elif kind == "to_float32":
            def change(i):
                if i == 10:
                    model.to(np.float32)
        elif kind == "forward_hook":
            handles = []
            def change(i):
                if i == 3:
                    handles.append(model[0].register_forward_hook(lambda m, a, out: out * 2.0))
                elif i == 10:
                    handles.pop().remove()
        elif kind == "tie_weights":
            def change(i):
                if i == 3:
                    model[2].weight = nn.Parameter(np.ones((2, 5)))
        elif kind == "opt_param_group_lr_list":
            def change(i):
                if i == 3:
                    opt.param_groups[0]["lr"] = 0.01
                elif i == 10:
                    opt.param_groups[0]["momentum"] = 0.0
        elif kind == "zero_grad_outside_set_none_false":
            def change(i):
                model.zero_grad(set_to_none=(i % 2 == 0))
        elif kind == "grad_written_outside":
            def change(i):
                if i in (3, 10):
                    for p in model.parameters():
                        p.grad = np.ones_like(p.data)
        else:
            raise AssertionError(kind)
        env.change = change
        return env
    return build


EDIT_KINDS = ["seq_replace_activation", "seq_append_layer", "load_state_dict_back",
              "opt_load_state_dict_back", "apply_reinit", "apply_rebind_data", "freeze_first",
              "to_float32", "forward_hook", "tie_weights", "opt_param_group_lr_list",
              "zero_grad_outside_set_none_false", "grad_written_outside"]
EDIT_XFAIL = {}


@pytest.mark.parametrize("kind", [pytest.param(k, marks=[xf(EDIT_XFAIL[k])] if k in EDIT_XFAIL else [])
                                  for k in EDIT_KINDS])
def test_module_edited_between_calls(kind):
    check(edit_build(kind), n=42 if kind in ("seq_replace_activation", "load_state_dict_back") else 12)


def ctx_build(kind):
    def build():
        rng = np.random.default_rng(41)
        model = nn.Sequential(nn.Linear(3, 4, rng=0, dtype=np.float64), nn.BatchNorm1d(4, dtype=np.float64),
                              nn.Dropout(0.25), nn.Linear(4, 1, rng=1, dtype=np.float64))
        env = E(args=lambda i: (rng.standard_normal((5, 3)),))
        env.snap = lambda: model_snap(model)
        if kind == "no_grad_around_some_calls":
            env.f = lambda x: tt.sum(model(x))
            env.ctx = lambda i: tt.no_grad() if 3 <= i < 10 else tt.enable_grad()
        elif kind == "enable_grad_inside_under_no_grad":
            def f(x):
                with tt.enable_grad():
                    out = tt.sum(model(x))
                return out
            env.f = f
            env.ctx = lambda i: tt.no_grad() if i >= 3 else tt.enable_grad()
        elif kind == "no_grad_inside":
            def f(x):
                with tt.no_grad():
                    h = model[0](x)
                return tt.sum(model[3](tt.tanh(h)))
            env.f = f
        elif kind == "set_grad_enabled_arg":
            def f(x, flag):
                with tt.set_grad_enabled(flag):
                    return tt.sum(model(x))
            env.f = f
            env.args = lambda i: (rng.standard_normal((5, 3)), i % 3 != 0)
        elif kind == "inference_mode_around":
            env.f = lambda x: model(x)
            env.ctx = lambda i: tt.inference_mode() if i >= 3 else tt.enable_grad()
        elif kind == "dropout_p_changed":
            env.f = lambda x: model(x)

            def change(i):
                if i == 3:
                    model[2].p = 0.5
                elif i == 10:
                    model[2].p = 0.0
                elif i == 40:
                    model[2].p = 0.9
            env.change = change
        elif kind == "bn_momentum_eps_changed":
            env.f = lambda x: model(x)

            def change(i):
                if i == 3:
                    model[1].momentum = 0.5
                elif i == 10:
                    model[1].eps = 1e-2
                elif i == 40:
                    model[1].momentum = None
            env.change = change
        elif kind == "train_flag_argument":
            def f(x, training):
                model.train(training)
                return model(x)
            env.f = f
            env.args = lambda i: (rng.standard_normal((5, 3)), i not in (3, 4, 10, 40))
        elif kind == "grad_then_tape_backward":
            env.f = lambda x: tt.sum(model(x) ** 2)

            def post(i, r):
                r.backward()
                return None
            env.post = post
        else:
            raise AssertionError(kind)
        return env
    return build


CTX_KINDS = ["no_grad_around_some_calls", "enable_grad_inside_under_no_grad", "no_grad_inside",
             "set_grad_enabled_arg", "inference_mode_around", "dropout_p_changed",
             "bn_momentum_eps_changed", "train_flag_argument", "grad_then_tape_backward"]
CTX_XFAIL = {}


@pytest.mark.parametrize("kind", [pytest.param(k, marks=[xf(CTX_XFAIL[k])] if k in CTX_XFAIL else [])
                                  for k in CTX_KINDS])
def test_grad_mode_and_module_state(kind):
    check(ctx_build(kind), n=42 if kind in ("dropout_p_changed", "bn_momentum_eps_changed") else 12)


# --------------------------------------------------------------------------------------------
# (c) optimizers and schedulers
# --------------------------------------------------------------------------------------------

OPTS = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.1),
    "sgd_momentum": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
    "sgd_nesterov_wd": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2),
    "sgd_dampening": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.3),
    "adam": lambda ps: optim.Adam(ps, lr=0.05),
    "adam_amsgrad_wd": lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True, weight_decay=1e-2),
    "adamw": lambda ps: optim.AdamW(ps, lr=0.05),
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01),
    "rmsprop_centered_mom": lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True,
                                                     weight_decay=1e-3),
}

SCHEDS = {
    "none": lambda o: None,
    "step": lambda o: sched_mod.StepLR(o, step_size=3, gamma=0.5),
    "exp": lambda o: sched_mod.ExponentialLR(o, gamma=0.9),
    "cosine": lambda o: sched_mod.CosineAnnealingLR(o, T_max=7, eta_min=1e-3),
    "linear": lambda o: sched_mod.LinearLR(o, start_factor=0.2, total_iters=5),
    "multistep": lambda o: sched_mod.MultiStepLR(o, milestones=[2, 5, 9], gamma=0.5),
    "lambda": lambda o: sched_mod.LambdaLR(o, lambda e: 1.0 / (1 + e)),
    "onecycle": lambda o: sched_mod.OneCycleLR(o, max_lr=0.2, total_steps=50),
    "sequential": lambda o: sched_mod.SequentialLR(
        o, [sched_mod.LinearLR(o, start_factor=0.5, total_iters=3),
            sched_mod.CosineAnnealingLR(o, T_max=8)], milestones=[3]),
    "chained": lambda o: sched_mod.ChainedScheduler(
        [sched_mod.StepLR(o, step_size=2, gamma=0.7), sched_mod.ExponentialLR(o, gamma=0.95)]),
}


def sched_state(s):
    if s is None:
        return None
    try:
        sd = s.state_dict()
    except Exception as e:  # noqa: BLE001
        sd = type(e).__name__
    return {"sd": sd, "last": s.get_last_lr() if hasattr(s, "get_last_lr") else None}


def opt_build(oname, sname, inside_sched=True):
    def build():
        rng = np.random.default_rng(51)
        model = _mlp()
        opt = OPTS[oname](model.parameters())
        sch = SCHEDS[sname](opt)
        env = E()

        def step(x, y):
            opt.zero_grad()
            loss = tt.mean(tt.square(model(x) - y))
            loss.backward()
            tt.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if sch is not None and inside_sched:
                sch.step()
            return loss
        env.f = step

        def args(i):
            x = rng.standard_normal((6, 3))
            if i >= 10:
                x = x * 50.0              # gradients that clip from the 10th call
            return x, np.sin(x[:, :2])
        env.args = args
        if sch is not None and not inside_sched:
            env.post = lambda i, r: sch.step()

        def change(i):
            if i == 3:
                opt.param_groups[0]["lr"] = opt.param_groups[0]["lr"] * 0.5
            elif i == 10 and "weight_decay" in opt.param_groups[0]:
                opt.param_groups[0]["weight_decay"] = 0.05
            elif i == 40 and "momentum" in opt.param_groups[0]:
                opt.param_groups[0]["momentum"] = 0.3
        if sch is None:
            env.change = change
        env.snap = lambda: (model_snap(model, opt), sched_state(sch),
                            [dict((k, v) for k, v in g.items() if k != "params") for g in opt.param_groups])
        return env
    return build


OPT_XFAIL = {}
opt_params = []
for _o in OPTS:
    for _s in ["none", "step", "cosine", "onecycle", "sequential"]:
        _id = f"{_o}-{_s}"
        _n = 42 if _s == "none" and _o in ("sgd_momentum", "adam", "rmsprop_centered_mom") else 12
        opt_params.append(pytest.param(_o, _s, True, _n, id=_id,
                                       marks=[xf(OPT_XFAIL[_id])] if _id in OPT_XFAIL else []))
for _s in ["exp", "linear", "multistep", "lambda", "chained"]:
    for _o in ["sgd_momentum", "adamw"]:
        _id = f"{_o}-{_s}"
        opt_params.append(pytest.param(_o, _s, True, 12, id=_id,
                                       marks=[xf(OPT_XFAIL[_id])] if _id in OPT_XFAIL else []))
for _s in ["step", "cosine", "onecycle", "lambda"]:
    _id = f"adam-{_s}-sched_outside"
    opt_params.append(pytest.param("adam", _s, False, 12, id=_id,
                                   marks=[xf(OPT_XFAIL[_id])] if _id in OPT_XFAIL else []))


@pytest.mark.parametrize("oname,sname,inside,n", opt_params)
def test_optimizer_schedule(oname, sname, inside, n):
    check(opt_build(oname, sname, inside), n=n)


def opt_variant_build(kind):
    def build():
        rng = np.random.default_rng(61)
        model = _mlp()
        extra = nn.Parameter(np.full((2,), 0.1))
        opt = optim.Adam(model.parameters(), lr=0.05) if "adam" in kind else \
            optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        env = E(snap=lambda: (model_snap(model, opt), extra, extra.grad,
                              [dict((k, v) for k, v in g.items() if k != "params")
                               for g in opt.param_groups]))
        env.args = lambda i: (rng.standard_normal((4, 3)),)

        def loss_of(x):
            return tt.mean(tt.square(model(x) * extra - 0.3))

        if kind in ("add_param_group_sgd", "add_param_group_adam"):
            def step(x):
                opt.zero_grad()
                extra.grad = None
                loss = loss_of(x)
                loss.backward()
                opt.step()
                return loss
            env.f = step

            def change(i):
                if i == 3:
                    opt.add_param_group({"params": [extra], "lr": 0.02})
                elif i == 10:
                    opt.param_groups[1]["lr"] = 0.2
            env.change = change
        elif kind in ("zero_grad_keep_sgd", "zero_grad_keep_adam"):
            def step(x):
                opt.zero_grad(set_to_none=False)
                loss = loss_of(x)
                loss.backward()
                opt.step()
                return loss
            env.f = step
        elif kind == "accumulate_step_every_3_outside":
            def micro(x):
                loss = loss_of(x) / 3.0
                loss.backward()
                return loss
            env.f = micro

            def post(i, r):
                if i % 3 == 0:
                    opt.step()
                    opt.zero_grad()
                return None
            env.post = post
        elif kind == "accumulate_bool_flag_inside":
            def micro(x, do_step):
                loss = loss_of(x) / 3.0
                loss.backward()
                if do_step:
                    opt.step()
                    opt.zero_grad()
                return loss
            env.f = micro
            env.args = lambda i: (rng.standard_normal((4, 3)), i % 3 == 0)
        elif kind == "accumulate_zero_every_4_set_none_false":
            def micro(x, zero):
                if zero:
                    opt.zero_grad(set_to_none=False)
                loss = loss_of(x)
                loss.backward()
                opt.step()
                return loss
            env.f = micro
            env.args = lambda i: (rng.standard_normal((4, 3)), i % 4 == 1)
        elif kind == "lr_argument_into_group":
            def step(x, lr):
                opt.param_groups[0]["lr"] = lr
                opt.zero_grad()
                loss = loss_of(x)
                loss.backward()
                opt.step()
                return loss
            env.f = step
            env.args = lambda i: (rng.standard_normal((4, 3)), 0.1 / (1 + i))
        elif kind == "clip_value_argument":
            def step(x, c):
                opt.zero_grad()
                loss = loss_of(x)
                loss.backward()
                tt.nn.utils.clip_grad_value_(model.parameters(), c)
                opt.step()
                return loss
            env.f = step
            env.args = lambda i: (rng.standard_normal((4, 3)) * (1 if i < 10 else 40), 0.05 * i)
        elif kind == "reduce_on_plateau_outside":
            sch = sched_mod.ReduceLROnPlateau(opt, patience=1, factor=0.5)

            def step(x):
                opt.zero_grad()
                loss = loss_of(x)
                loss.backward()
                opt.step()
                return loss
            env.f = step
            env.args = lambda i: (np.ones((4, 3)) * (i % 2),)
            env.post = lambda i, r: sch.step(float(r))
        elif kind == "manual_sgd_no_grad_inside":
            def step(x, lr):
                for p in model.parameters():
                    p.grad = None
                loss = loss_of(x)
                loss.backward()
                with tt.no_grad():
                    for p in model.parameters():
                        p -= lr * p.grad
                return loss
            env.f = step
            env.args = lambda i: (rng.standard_normal((4, 3)), 0.05 if i < 10 else 0.5)
        elif kind == "momentum_changed_adam_betas":
            def step(x):
                opt.zero_grad()
                loss = loss_of(x)
                loss.backward()
                opt.step()
                return loss
            env.f = step

            def change(i):
                if i == 3:
                    opt.param_groups[0]["betas"] = (0.5, 0.9)
                elif i == 10:
                    opt.param_groups[0]["eps"] = 1e-3
                elif i == 40:
                    opt.param_groups[0]["amsgrad"] = True
            env.change = change
        elif kind == "state_reset_between_calls_adam":
            def step(x):
                opt.zero_grad()
                loss = loss_of(x)
                loss.backward()
                opt.step()
                return loss
            env.f = step

            def change(i):
                if i in (3, 10):
                    opt.state.clear()
            env.change = change
        elif kind == "second_optimizer_swapped_in_adam":
            holder = {"opt": opt}

            def step(x):
                o = holder["opt"]
                o.zero_grad()
                loss = loss_of(x)
                loss.backward()
                o.step()
                return loss
            env.f = step

            def change(i):
                if i == 3:
                    holder["opt"] = optim.RMSprop(model.parameters(), lr=0.01)
                elif i == 10:
                    holder["opt"] = opt
            env.change = change
        else:
            raise AssertionError(kind)
        return env
    return build


OPT_VARIANTS = ["add_param_group_sgd", "add_param_group_adam", "zero_grad_keep_sgd", "zero_grad_keep_adam",
                "accumulate_step_every_3_outside", "accumulate_bool_flag_inside",
                "accumulate_zero_every_4_set_none_false", "lr_argument_into_group",
                "clip_value_argument", "reduce_on_plateau_outside", "manual_sgd_no_grad_inside",
                "momentum_changed_adam_betas", "state_reset_between_calls_adam",
                "second_optimizer_swapped_in_adam"]
OPT_VARIANT_XFAIL = {}


@pytest.mark.parametrize("kind", [pytest.param(k, marks=[xf(OPT_VARIANT_XFAIL[k])]
                                               if k in OPT_VARIANT_XFAIL else [])
                                  for k in OPT_VARIANTS])
def test_optimizer_variants(kind):
    check(opt_variant_build(kind), n=42 if kind == "momentum_changed_adam_betas" else 12)


# --------------------------------------------------------------------------------------------
# (d) tt.scipy inside compiled functions, arguments moved to hard points
# --------------------------------------------------------------------------------------------

def _pos(i, r):
    """Positive arguments: moderate, then large (3rd call), tiny (10th), another shape (40th)."""
    x = r.uniform(0.5, 3.0, 5)
    if i >= 3:
        x = x * 60.0
    if i >= 10:
        x = r.uniform(1e-8, 1e-3, 5)
    if i >= 40:
        x = r.uniform(0.5, 3.0, (2, 3))
    return x


def _unit(i, r):
    """In (0, 1): the middle, then near 1, then near 0, then another shape."""
    x = r.uniform(0.2, 0.8, 5)
    if i >= 3:
        x = 1.0 - r.uniform(1e-9, 1e-4, 5)
    if i >= 10:
        x = r.uniform(1e-12, 1e-6, 5)
    if i >= 40:
        x = r.uniform(0.2, 0.8, (2, 3))
    return x


def _real(i, r):
    x = r.standard_normal(5)
    if i >= 3:
        x = x * 40.0
    if i >= 10:
        x = x * 1e-7
    if i >= 40:
        x = r.standard_normal((2, 3)) * 8.0
    return x


def _sym(i, r):
    return _unit(i, r) * 2.0 - 1.0


SPECIALS = {
    "gammaln": (special.gammaln, _pos), "digamma": (special.digamma, _pos),
    "erf": (special.erf, _real), "erfc": (special.erfc, _real), "erfinv": (special.erfinv, _sym),
    "erfcinv": (lambda x: special.erfcinv(x * 2.0), _unit),
    "expit": (special.expit, _real), "logit": (special.logit, _unit),
    "log_ndtr": (special.log_ndtr, _real), "ndtr": (special.ndtr, _real), "ndtri": (special.ndtri, _unit),
    "i0": (lambda x: special.i0(x * 0.1), _pos), "i0e": (special.i0e, _pos), "i1e": (special.i1e, _pos),
    "ive": (lambda x: special.ive(1.5, x), _pos), "jv": (lambda x: special.jv(0.5, x), _pos),
    "gammainc": (lambda x: special.gammainc(2.0, x), _pos),
    "gammaincc": (lambda x: special.gammaincc(2.0, x), _pos),
    "betainc": (lambda x: special.betainc(2.0, 3.0, x), _unit),
    "xlogy": (lambda x: special.xlogy(x, x + 1.0), _pos), "xlog1py": (lambda x: special.xlog1py(x, x), _pos),
    "entr": (special.entr, _unit), "polygamma1": (lambda x: special.polygamma(1, x), _pos),
    "multigammaln": (lambda x: special.multigammaln(x + 2.0, 2), _pos),
    "rgamma": (special.rgamma, _pos), "softplus": (special.softplus, _real),
    "logsumexp": (lambda x: special.logsumexp(x), _real),
    "gammainc_a": (lambda x: special.gammainc(x, 1.5), _pos),
}


def special_build(name, form):
    fn, mover = SPECIALS[name]

    def build():
        rng = np.random.default_rng(71)
        env = E(args=lambda i: (mover(i, rng),))
        if form == "value":
            env.f = lambda x: fn(x)
        elif form == "vag":
            env.f = tt.value_and_grad(lambda x: tt.sum(fn(x)))
        elif form == "tensor_param":
            w = tt.tensor(np.array(1.0), requires_grad=True)
            env.f = lambda x: tt.sum(fn(x * w))

            def post(i, r):
                r.backward()
                return w.grad
            env.post = post
            env.snap = lambda: (w, w.grad)
        return env
    return build


SPECIAL_XFAIL = {}
special_params = []
for _nm in SPECIALS:
    for _fm in ["value", "vag", "tensor_param"]:
        if _fm == "tensor_param" and _nm not in ("gammaln", "erfinv", "logit", "ive", "betainc", "ndtri",
                                                 "log_ndtr", "gammaincc"):
            continue
        _id = f"{_fm}-{_nm}"
        _n = 42 if _fm == "vag" and _nm in ("gammaln", "erfinv", "ndtri", "betainc", "log_ndtr") else 12
        special_params.append(pytest.param(_nm, _fm, _n, id=_id,
                                           marks=[xf(SPECIAL_XFAIL[_id])] if _id in SPECIAL_XFAIL else []))


@pytest.mark.parametrize("name,form,n", special_params)
def test_scipy_special(name, form, n):
    check(special_build(name, form), n=n)


def _spd(i, r, n=3):
    a = r.standard_normal((n, n))
    m = a @ a.T + n * np.eye(n)
    if i >= 3:
        m = m * 1e6
    if i >= 10:
        m = m / 1e6 + np.outer(np.ones(n), np.ones(n)) * 1e8   # badly conditioned
    if i >= 40:
        return _spd(1, r, n + 1)
    return m


LINALG = {
    "cholesky": lambda a: tt.sum(slinalg.cholesky(a, lower=True)),
    "cho_solve": lambda a: tt.sum(slinalg.cho_solve(slinalg.cho_factor(a), np.ones(a.shape[0]))),
    "solve_triangular": lambda a: tt.sum(slinalg.solve_triangular(tt.tril(a), np.arange(1.0, a.shape[0] + 1),
                                                                  lower=True)),
    "expm": lambda a: tt.sum(slinalg.expm(a / tt.linalg.norm(a))),
    "sqrtm": lambda a: tt.sum(tt.real(slinalg.sqrtm(a))),
    "sylvester": lambda a: tt.sum(slinalg.solve_sylvester(a, a, tt.eye(a.shape[0]))),
    "tt_solve": lambda a: tt.sum(tt.linalg.solve(a, np.ones(a.shape[0]))),
    "tt_inv": lambda a: tt.sum(tt.linalg.inv(a)),
    "tt_eigh": lambda a: tt.sum(tt.linalg.eigh(a)[0] ** 2),
    "tt_svdvals": lambda a: tt.sum(tt.linalg.svdvals(a)),
    "tt_slogdet": lambda a: tt.linalg.slogdet(a)[1],
    "tt_det": lambda a: tt.linalg.det(a / 10.0),
    "tt_matrix_power": lambda a: tt.sum(tt.linalg.matrix_power(a / tt.linalg.norm(a), 3)),
}


def linalg_build(name, form):
    fn = LINALG[name]

    def build():
        rng = np.random.default_rng(81)
        env = E(args=lambda i: (_spd(i, rng),))
        env.f = fn if form == "value" else tt.value_and_grad(fn)
        return env
    return build


LINALG_XFAIL = {}
linalg_params = [pytest.param(k, fm, id=f"{fm}-{k}",
                              marks=[xf(LINALG_XFAIL[f"{fm}-{k}"])] if f"{fm}-{k}" in LINALG_XFAIL else [])
                 for k in LINALG for fm in ("value", "vag")]


@pytest.mark.parametrize("name,form", linalg_params)
def test_scipy_linalg(name, form):
    check(linalg_build(name, form), n=42 if name in ("cholesky", "tt_slogdet") else 12)


def ode_build(kind):
    def build():
        rng = np.random.default_rng(91)
        env = E()

        def times(i):
            return np.linspace(0.0, 2.0, 5 if i < 3 else 7)

        if kind == "decay_rate_vag":
            def loss(k, y0, t):
                return tt.sum(odeint(lambda y, t, k: -k * y, y0, t, args=(k,)))
            env.f = tt.value_and_grad(loss)
            env.args = lambda i: (np.array(0.5 if i < 10 else 25.0),
                                  np.array([1.0, 2.0]) * (1 if i < 3 else 1e3), times(i))
        elif kind == "decay_number_argument":
            env.f = lambda k, y0, t: odeint(lambda y, t, k: -k * y, y0, t, args=(k,))
            env.args = lambda i: (0.3 * i, np.array([1.0]), times(i))
        elif kind == "closed_over_tensor":
            theta = tt.tensor(np.array([0.5, -0.2]), requires_grad=True)

            def f(y0, t):
                ys = odeint(lambda y, t: -theta * y + tt.sin(t), y0, t)
                return tt.sum(ys ** 2)
            env.f = f
            env.args = lambda i: (rng.standard_normal(2), times(i))

            def post(i, r):
                r.backward()
                g = theta.grad
                theta.grad = None
                return g
            env.post = post
            env.snap = lambda: theta
        elif kind == "neural_ode_step":
            model = nn.Sequential(nn.Linear(2, 4, rng=0, dtype=np.float64), nn.Tanh(),
                                  nn.Linear(4, 2, rng=1, dtype=np.float64))
            opt = optim.Adam(model.parameters(), lr=0.01)

            def step(y0, t):
                opt.zero_grad()
                ys = odeint(lambda y, t: model(y), y0, t)
                loss = tt.mean(ys ** 2)
                loss.backward()
                opt.step()
                return loss
            env.f = step
            env.args = lambda i: (rng.standard_normal(2) * (1 if i < 10 else 5), times(i))
            env.snap = lambda: model_snap(model, opt)
        elif kind == "lotka_volterra_grad_rtol":
            def lv(y, t, th):
                return tt.stack([th[0] * y[0] - th[1] * y[0] * y[1], -th[2] * y[1] + th[3] * y[0] * y[1]])

            def loss(th, t):
                ys = odeint(lv, np.array([10.0, 5.0]), t, args=(th,), rtol=1e-6, atol=1e-6)
                return tt.sum(ys[-1])
            env.f = tt.grad(loss)
            env.args = lambda i: (np.array([1.0, 0.1, 1.5, 0.075]) * (1 if i < 10 else 1.3),
                                  times(i) * 0.5)
        elif kind == "stiff_rate_jump":
            def loss(k, t):
                return tt.sum(odeint(lambda y, t, k: -k * (y - tt.cos(t)), np.array([0.0]), t, args=(k,)))
            env.f = tt.value_and_grad(loss)
            env.args = lambda i: (np.array(1.0 if i < 3 else (20.0 if i < 10 else 1e-6)), times(i))
        elif kind == "grad_of_compiled_odeint":
            inner = tt.compile(lambda k, t: tt.sum(odeint(lambda y, t, k: -k * y, np.array([1.0]), t,
                                                          args=(k,))))
            env.f = tt.grad(lambda k, t: inner(k, t) * 2.0)
            env.args = lambda i: (np.array(0.2 * i), times(i))
        else:
            raise AssertionError(kind)
        return env
    return build


ODE_KINDS = ["decay_rate_vag", "decay_number_argument", "closed_over_tensor", "neural_ode_step",
             "lotka_volterra_grad_rtol", "stiff_rate_jump", "grad_of_compiled_odeint"]
ODE_XFAIL = {}


@pytest.mark.parametrize("kind", [pytest.param(k, marks=[xf(ODE_XFAIL[k])] if k in ODE_XFAIL else [])
                                  for k in ODE_KINDS])
def test_scipy_odeint(kind):
    check(ode_build(kind), n=12)


# --------------------------------------------------------------------------------------------
# (a, continued) value-dependent operations under nested transforms inside compile
# --------------------------------------------------------------------------------------------

KINKED = {
    "abs": lambda x: tt.sum(tt.abs(x) ** 3),
    "relu": lambda x: tt.sum(tt.relu(x) ** 3),
    "max": lambda x: tt.sum(tt.max(x, axis=1) ** 3),
    "sort": lambda x: tt.sum(tt.sort(x, axis=1)[:, 0] ** 3),
    "clip": lambda x: tt.sum(tt.clip(x, -0.5, 0.5) ** 3),
    "maximum": lambda x: tt.sum(tt.maximum(x, 0.1) ** 3),
    "where": lambda x: tt.sum(tt.where(x > 0, x ** 3, x ** 2)),
    "leaky": lambda x: tt.sum(tt.leaky_relu(x) ** 3),
}

NESTED = {
    "hvp": lambda f: (lambda x: tt.hvp(f, (x,), (np.ones_like(x),))),
    "vmap": lambda f: tt.vmap(lambda r: f(r[None, :])),
    "vmap_grad": lambda f: tt.vmap(tt.grad(lambda r: f(r[None, :]))),
    "vmap_hessian": lambda f: tt.vmap(tt.hessian(lambda r: f(r[None, :]))),
    "jvp_of_grad": lambda f: (lambda x: tt.jvp(tt.grad(f), (x,), (np.ones_like(x),))[1]),
    "vmap_jvp": lambda f: tt.vmap(lambda r: tt.jvp(lambda u: f(u[None, :]), (r,), (np.ones_like(r),))[1]),
}

KINK_XFAIL = {
    "hvp-where": "silent: forward-over-reverse (tt.hvp) through tt.where's VJP inside compile keeps "
                 "the recorded mask; H v differs from the 2nd call",
    "jvp_of_grad-where": "silent: tt.jvp(tt.grad(f)) through tt.where inside compile keeps the recorded "
                         "mask; the tangent differs from the 2nd call",
    "vmap-sort": "silent: tt.sort's permutation is frozen under plain tt.vmap inside compile: the "
                 "sorted values are call 1's order applied to new rows",
    "vmap_grad-sort": "silent: tt.sort's permutation is frozen under tt.vmap(tt.grad) inside compile",
    "vmap_hessian-sort": "silent: tt.sort's permutation is frozen under tt.vmap(tt.hessian) inside compile",
    "vmap_jvp-sort": "silent: tt.sort's permutation is frozen under tt.vmap(jvp) inside compile",
}


KINK_XFAIL = {k: v for k, v in KINK_XFAIL.items() if k not in FIXED}


def kink_build(fname, tname):
    def build():
        rng = np.random.default_rng(101)

        def args(i):
            x = rng.standard_normal((3 if i < 3 else 4, 4))
            return (x * (1.0 if i < 10 else 1e3),)
        return E(f=NESTED[tname](KINKED[fname]), args=args)
    return build


kink_params = [pytest.param(f_, t_, id=f"{t_}-{f_}",
                            marks=[xf(KINK_XFAIL[f"{t_}-{f_}"])] if f"{t_}-{f_}" in KINK_XFAIL else [])
               for f_ in KINKED for t_ in NESTED]


@pytest.mark.parametrize("fname,tname", kink_params)
def test_kinked_ops_under_nested_transforms(fname, tname):
    check(kink_build(fname, tname), n=12)
