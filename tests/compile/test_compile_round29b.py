"""Round 29b: every nn layer and loss inside research patterns, compiled against eager.

Each case builds the same layer from the same seeds twice, runs it eagerly and under
``tt.compile`` for 12 calls (some 42), with inputs, labels (ignore_index positions), masks,
number arguments (DP clipping norms) and train/eval modes changing between calls, and compares bit
for bit (type, dtype, shape, bytes) every output, parameter, ``.grad``, buffer, the optimizer
state and tinytensor's and NumPy's generator states. Patterns: ``vg`` (value_and_grad of
functional_call), ``pex`` (vmap(grad) per-example gradients), ``dpsgd``/``dpsgd_c`` (per-example
clipping then mean; ``_c``: the clip norm a float argument), ``hvp`` (Hessian-vector product w.r.t.
a weight), ``gn`` (Gauss-Newton product J^T H_L J v by jvp/hvp/vjp), ``maml`` (grad through an inner
SGD step), ``jac`` (jacobian of outputs w.r.t. inputs), ``hess_x`` (hessian w.r.t. one example),
``step`` (object-style zero_grad/backward/SGD-momentum step inside), ``tape`` (compiled loss,
backward outside). Where eager raises (BatchNorm in train under vmap) compiled must raise the
same type; a compiled-only error or refusal not listed in docs/guides/compile.md fails.

Counts: 254 cases; 244 equal; 10 strict xfails (6 crash, 4 false refusal); 0 silent value differences.

xfails by class:

crash (compiled raises where eager runs; 6)
  instnorm1d_track-ce-jac, instnorm1d_track-ce-hess_x: InstanceNorm1d(track_running_stats=True)
      in train under jacobian/hessian: compiled raises TypeError "np.copyto on a value batched by
      tt.vmap"; eager falls back to the basis loop (as transforms.md documents) and runs.
  mha_pad-ce_ignore-pex, mha_pad-ce_ignore-dpsgd, mha_pad-ce_ignore-dpsgd_c, mha_causal-ce-dpsgd:
      MultiheadAttention with a key_padding_mask under vmap(grad) (per-example gradients, DP-SGD):
      compiled raises TypeError "np.asarray() of a value batched by tt.vmap"; eager runs.

false refusal (RuntimeError tt.compile: "handed a NumPy array computed from traced data to
tinytensor's _select()"; not a documented refusal; 4)
  relu-l1-hvp, relu-l1-gn, relu-l1-maml, relu-l1-hess_x: any second-order use of F.l1_loss
      (HVP, Gauss-Newton, MAML outer gradient, input Hessian) is refused compiled.

Also seen, not failed on: NumPy's warning text differs ("invalid value encountered in scalar
divide" compiled vs "... in divide" eager) for a cross-entropy whose labels are all ignored.
"""

import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import functional as F

fc = nn.functional_call


# ----------------------------------------------------------------------------- snapshots


def snap(v):
    """A bit-exact description of a value: type, dtype, shape, bytes, recursively."""
    if isinstance(v, tt.Tensor):
        a = np.asarray(v.data)
        return ("Tensor", bool(v.requires_grad), a.dtype.str, a.shape, a.tobytes())
    if isinstance(v, np.ndarray):
        return ("ndarray", v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes())
    if isinstance(v, np.generic):
        return (type(v).__name__, np.asarray(v).tobytes())
    if isinstance(v, dict):
        return (type(v).__name__, tuple((k, snap(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(snap(x) for x in v))
    if isinstance(v, float):
        return ("float", repr(v), np.float64(v).tobytes())
    if v is None or isinstance(v, (int, str, bool)):
        return (type(v).__name__, repr(v))
    return (type(v).__name__, repr(v))


def module_state(m):
    out = []
    for name, p in m.named_parameters():
        out.append((name, snap(p.data), snap(p.grad)))
    for b in m.buffers():
        out.append(("buf", snap(b.data if isinstance(b, tt.Tensor) else b)))
    out.append(("training", m.training))
    return out


# ----------------------------------------------------------------------------- models


class RNNHead(nn.Module):
    def __init__(self, kind):
        super().__init__()
        cls = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM, "rnn_relu": nn.RNN}[kind]
        kw = {"nonlinearity": "relu"} if kind == "rnn_relu" else {}
        self.kind = kind
        self.rnn = cls(3, 4, batch_first=True, **kw)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


class AttHead(nn.Module):
    def __init__(self, causal=False):
        super().__init__()
        self.mha = nn.MultiheadAttention(4, 2, batch_first=True)
        self.fc = nn.Linear(4, 3)
        self.causal = causal

    def forward(self, x, mask):
        T = x.shape[1]
        am = np.triu(np.ones((T, T), dtype=bool), 1) if self.causal else None
        o, _ = self.mha(x, x, x, key_padding_mask=mask, attn_mask=am)
        return self.fc(tt.mean(o, axis=1))


class EmbHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 4, padding_idx=0)
        self.fc = nn.Linear(4, 3)

    def forward(self, idx):
        return self.fc(tt.mean(self.emb(idx), axis=1))


class Pool1d(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.conv = nn.Conv1d(2, 3, 3, padding=1)
        self.kind = kind
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        h = F.relu(self.conv(x))
        h = F.adaptive_avg_pool1d(h, 2)
        return self.fc(h.reshape(h.shape[0], -1))


def seq(*layers):
    return nn.Sequential(*layers)


def lin(a, b):
    return nn.Linear(a, b)


# Each layer spec: builder, input kind, needs-batch flag (always given x[None] per example),
# and whether it has train-mode state (switch train/eval).
LAYERS = {
    "relu": (lambda: seq(lin(4, 5), nn.ReLU(), lin(5, 3)), "vec"),
    "gelu": (lambda: seq(lin(4, 5), nn.GELU(), lin(5, 3)), "vec"),
    "gelu_tanh": (lambda: seq(lin(4, 5), nn.GELU(approximate="tanh"), lin(5, 3)), "vec"),
    "silu": (lambda: seq(lin(4, 5), nn.SiLU(), lin(5, 3)), "vec"),
    "elu": (lambda: seq(lin(4, 5), nn.ELU(0.7), lin(5, 3)), "vec"),
    "leaky": (lambda: seq(lin(4, 5), nn.LeakyReLU(0.2), lin(5, 3)), "vec"),
    "softplus": (lambda: seq(lin(4, 5), nn.Softplus(beta=2.0, threshold=0.5), lin(5, 3)), "vec"),
    "mish": (lambda: seq(lin(4, 5), nn.Mish(), lin(5, 3)), "vec"),
    "prelu": (lambda: seq(lin(4, 5), nn.PReLU(), lin(5, 3)), "vec"),
    "sigmoid_tanh": (lambda: seq(lin(4, 5), nn.Sigmoid(), lin(5, 5), nn.Tanh(), lin(5, 3)), "vec"),
    "dropout_eval": (lambda: seq(lin(4, 5), nn.ReLU(), nn.Dropout(0.5), lin(5, 3)).eval(), "vec"),
    "layernorm": (lambda: seq(lin(4, 5), nn.LayerNorm(5), nn.ReLU(), lin(5, 3)), "vec"),
    "rmsnorm": (lambda: seq(lin(4, 5), nn.RMSNorm(5), lin(5, 3)), "vec"),
    "bn1d_eval": (lambda: seq(lin(4, 5), nn.BatchNorm1d(5), nn.ReLU(), lin(5, 3)).eval(), "vec"),
    "bn1d_train": (lambda: seq(lin(4, 5), nn.BatchNorm1d(5), nn.ReLU(), lin(5, 3)), "vec"),
    "conv1d": (lambda: Pool1d("avg"), "seq1d"),
    "conv2d_max": (
        lambda: seq(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), lin(8, 3)),
        "img",
    ),
    "conv2d_avg": (
        lambda: seq(nn.Conv2d(1, 2, 3, padding=1), nn.AvgPool2d(2), nn.Flatten(), lin(8, 3)),
        "img",
    ),
    "conv2d_amax": (lambda: seq(nn.Conv2d(1, 2, 2), nn.AdaptiveMaxPool2d(2), nn.Flatten(), lin(8, 3)), "img"),
    "conv2d_aavg": (
        lambda: seq(nn.Conv2d(1, 2, 2), nn.AdaptiveAvgPool2d((2, 1)), nn.Flatten(), lin(4, 3)),
        "img",
    ),
    "bn2d_eval": (
        lambda: seq(
            nn.Conv2d(1, 2, 3, padding=1),
            nn.BatchNorm2d(2),
            nn.ReLU(),
            nn.AvgPool2d(2),
            nn.Flatten(),
            lin(8, 3),
        ).eval(),
        "img",
    ),
    "bn2d_train": (
        lambda: seq(
            nn.Conv2d(1, 2, 3, padding=1),
            nn.BatchNorm2d(2),
            nn.ReLU(),
            nn.AvgPool2d(2),
            nn.Flatten(),
            lin(8, 3),
        ),
        "img",
    ),
    "groupnorm": (
        lambda: seq(
            nn.Conv2d(1, 4, 3, padding=1),
            nn.GroupNorm(2, 4),
            nn.SiLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            lin(16, 3),
        ),
        "img",
    ),
    "instnorm2d": (
        lambda: seq(
            nn.Conv2d(1, 2, 3, padding=1),
            nn.InstanceNorm2d(2, affine=True),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            lin(8, 3),
        ),
        "img",
    ),
    "instnorm1d_track": (
        lambda: seq(
            nn.Conv1d(2, 3, 3, padding=1),
            nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
            nn.ReLU(),
            nn.Flatten(),
            lin(15, 3),
        ),
        "seq1d",
    ),
    "embedding_pad": (EmbHead, "idx"),
    "rnn": (lambda: RNNHead("rnn"), "seq"),
    "rnn_relu": (lambda: RNNHead("rnn_relu"), "seq"),
    "gru": (lambda: RNNHead("gru"), "seq"),
    "lstm": (lambda: RNNHead("lstm"), "seq"),
    "mha_pad": (lambda: AttHead(False), "att"),
    "mha_causal": (lambda: AttHead(True), "att"),
}
ACTIVATIONS = {
    "relu",
    "gelu",
    "gelu_tanh",
    "silu",
    "elu",
    "leaky",
    "softplus",
    "mish",
    "prelu",
    "sigmoid_tanh",
}
JAC = {
    "conv1d",
    "conv2d_max",
    "conv2d_amax",
    "bn2d_eval",
    "groupnorm",
    "instnorm1d_track",
    "gru",
    "mha_causal",
}
HESS_X = {"conv2d_max", "lstm", "layernorm", "bn1d_eval", "instnorm1d_track", "mha_pad"}
TRAIN_STATE = {"bn1d_train", "bn2d_train", "instnorm1d_track", "dropout_eval", "bn1d_eval", "bn2d_eval"}


def make_x(kind, rng, B=3):
    if kind == "vec":
        return rng.standard_normal((B, 4)).astype(np.float32), ()
    if kind == "seq1d":
        return rng.standard_normal((B, 2, 5)).astype(np.float32), ()
    if kind == "img":
        return rng.standard_normal((B, 1, 4, 4)).astype(np.float32), ()
    if kind == "idx":
        return rng.integers(0, 6, (B, 3)), ()
    if kind == "seq":
        return rng.standard_normal((B, 3, 3)).astype(np.float32), ()
    if kind == "att":
        mask = rng.random((B, 3)) < 0.4
        mask[:, rng.integers(0, 3)] = False  # at least one key per row
        return rng.standard_normal((B, 3, 4)).astype(np.float32), (mask,)
    raise AssertionError(kind)


# Losses: (output transform, loss fn, target generator)
def ce_labels(rng, B, ignore=False):
    y = rng.integers(0, 3, B)
    if ignore:
        y[rng.random(B) < 0.35] = -1
    return y


LOSSES = {
    "ce": (lambda o, y: F.cross_entropy(o, y), lambda rng, B: ce_labels(rng, B)),
    "ce_ignore": (
        lambda o, y: F.cross_entropy(o, y, ignore_index=-1),
        lambda rng, B: ce_labels(rng, B, True),
    ),
    "ce_smooth": (lambda o, y: F.cross_entropy(o, y, label_smoothing=0.2), lambda rng, B: ce_labels(rng, B)),
    "ce_weight": (
        lambda o, y: F.cross_entropy(o, y, weight=np.array([0.5, 2.0, 1.0], np.float32)),
        lambda rng, B: ce_labels(rng, B),
    ),
    "ce_all": (
        lambda o, y: F.cross_entropy(
            o, y, weight=np.array([0.5, 2.0, 1.0], np.float32), ignore_index=-1, label_smoothing=0.1
        ),
        lambda rng, B: ce_labels(rng, B, True),
    ),
    "ce_sum": (lambda o, y: F.cross_entropy(o, y, reduction="sum"), lambda rng, B: ce_labels(rng, B)),
    "ce_probs": (
        lambda o, y: F.cross_entropy(o, y),
        lambda rng, B: rng.dirichlet(np.ones(3), B).astype(np.float32),
    ),
    "nll": (lambda o, y: F.nll_loss(F.log_softmax(o, -1), y), lambda rng, B: ce_labels(rng, B)),
    "nll_ignore": (
        lambda o, y: F.nll_loss(F.log_softmax(o, -1), y, ignore_index=-1),
        lambda rng, B: ce_labels(rng, B, True),
    ),
    "mse": (lambda o, y: F.mse_loss(o, y), lambda rng, B: rng.standard_normal((B, 3)).astype(np.float32)),
    "l1": (lambda o, y: F.l1_loss(o, y), lambda rng, B: rng.standard_normal((B, 3)).astype(np.float32)),
    "smooth_l1": (
        lambda o, y: F.smooth_l1_loss(o, y, beta=0.5),
        lambda rng, B: rng.standard_normal((B, 3)).astype(np.float32),
    ),
    "huber": (
        lambda o, y: F.huber_loss(o, y, delta=0.4),
        lambda rng, B: rng.standard_normal((B, 3)).astype(np.float32),
    ),
    "bce": (
        lambda o, y: F.binary_cross_entropy(tt.sigmoid(o), y),
        lambda rng, B: (rng.random((B, 3)) < 0.5).astype(np.float32),
    ),
    "bce_logits": (
        lambda o, y: F.binary_cross_entropy_with_logits(
            o, y, pos_weight=np.array([1.0, 3.0, 0.5], np.float32)
        ),
        lambda rng, B: (rng.random((B, 3)) < 0.5).astype(np.float32),
    ),
    "kl": (
        lambda o, y: F.kl_div(F.log_softmax(o, -1), y, reduction="batchmean"),
        lambda rng, B: rng.dirichlet(np.ones(3), B).astype(np.float32),
    ),
    "kl_logt": (
        lambda o, y: F.kl_div(F.log_softmax(o, -1), y, reduction="sum", log_target=True),
        lambda rng, B: np.log(rng.dirichlet(np.ones(3), B)).astype(np.float32),
    ),
}


# ----------------------------------------------------------------------------- patterns


def params_of(m):
    return {k: p.data for k, p in m.named_parameters()}


def first_weight(m):
    for k, p in m.named_parameters():
        if p.data.ndim >= 2:
            return k
    return next(iter(m.named_parameters()))[0]


def dp_clip(per, C):
    keys = list(per)
    sq = None
    for k in keys:
        g = per[k]
        s = tt.sum(tt.reshape(g * g, (g.shape[0], -1)), axis=1)
        sq = s if sq is None else sq + s
    norm = tt.sqrt(sq)
    factor = 1.0 / tt.maximum(norm / C, 1.0)
    out = {}
    for k in keys:
        g = per[k]
        f = tt.reshape(factor, (-1,) + (1,) * (g.ndim - 1))
        out[k] = tt.mean(g * f, axis=0)
    return out


def build_pattern(pattern, model, lossf, ykind):
    """Return f(*args) for the pattern; args generated by the harness."""

    def batch_loss(p, x, y, *extra):
        return lossf(fc(model, p, x, *extra), y)

    def ex_loss(p, x, y, *extra):
        return lossf(fc(model, p, x[None], *[e[None] for e in extra]), y[None])

    if pattern == "vg":
        return lambda p, x, y, *e: tt.value_and_grad(batch_loss)(p, x, y, *e)
    if pattern == "pex":
        return lambda p, x, y, *e: tt.vmap(tt.grad(ex_loss), in_axes=(None, 0, 0) + (0,) * len(e))(
            p, x, y, *e
        )
    if pattern == "dpsgd":

        def f(p, x, y, *e):
            per = tt.vmap(tt.grad(ex_loss), in_axes=(None, 0, 0) + (0,) * len(e))(p, x, y, *e)
            return dp_clip(per, 0.5)

        return f
    if pattern == "dpsgd_c":

        def f(p, x, y, C, *e):
            per = tt.vmap(tt.grad(ex_loss), in_axes=(None, 0, 0) + (0,) * len(e))(p, x, y, *e)
            return dp_clip(per, C)

        return f
    if pattern == "hvp":
        wk = first_weight(model)

        def f(p, x, y, v, *e):
            return tt.hvp(lambda W: batch_loss({**p, wk: W}, x, y, *e), (p[wk],), (v,))

        return f
    if pattern == "gn":
        wk = first_weight(model)

        def f(p, x, y, v, *e):
            def out_of(W):
                return fc(model, {**p, wk: W}, x, *e)

            o, Jv = tt.jvp(out_of, (p[wk],), (v,))
            HJv = tt.hvp(lambda z: lossf(z, y), (o,), (Jv,))
            _, pull = tt.vjp(out_of, p[wk])
            return pull(HJv)

        return f
    if pattern == "maml":

        def f(p, x, y, *e):
            def outer(p):
                es = [a[:2] for a in e]
                eq = [a[2:] for a in e]
                g = tt.grad(batch_loss)(p, x[:2], y[:2], *es)
                p2 = {k: p[k] - 0.1 * g[k] for k in p}
                return batch_loss(p2, x[2:], y[2:], *eq)

            return tt.value_and_grad(outer)(p)

        return f
    if pattern == "jac":
        return lambda p, x, y, *e: tt.jacobian(lambda xx: fc(model, p, xx, *[a[:2] for a in e]))(x[:2])
    if pattern == "hess_x":
        return lambda p, x, y, *e: tt.hessian(lambda xx: ex_loss(p, xx, y[0], *[a[0] for a in e]))(x[0])
    if pattern == "step":
        opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        def f(x, y, *e):
            opt.zero_grad()
            loss = lossf(model(x, *e), y)
            loss.backward()
            opt.step()
            return loss

        f.opt = opt
        return f
    if pattern == "tape":
        return lambda x, y, *e: lossf(model(x, *e), y)
    raise AssertionError(pattern)


FUNCTIONAL = {"vg", "pex", "dpsgd", "dpsgd_c", "hvp", "gn", "maml", "jac", "hess_x"}


def run_case(layer, lossname, pattern, n_calls, switch_at, compiled):
    tt.manual_seed(1234)
    np.random.seed(7)
    builder, kind = LAYERS[layer]
    model = builder()
    lossf, ygen = LOSSES[lossname]
    f = build_pattern(pattern, model, lossf, kind)
    opt = getattr(f, "opt", None)
    g = tt.compile(f) if compiled else f
    rng = np.random.default_rng(99)
    record = []
    for i in range(n_calls):
        if switch_at is not None and i == switch_at:
            model.train(not model.training)
        x, extra = make_x(kind, rng)
        y = ygen(rng, x.shape[0])
        args = []
        if pattern in FUNCTIONAL:
            p = params_of(model)
            args = [p, x, y]
            if pattern == "dpsgd_c":
                args.append(float(rng.choice([0.05, 0.3, 2.0])))
            if pattern in ("hvp", "gn"):
                wk = first_weight(model)
                args.append(rng.standard_normal(p[wk].shape).astype(p[wk].dtype))
        else:
            args = [x, y]
        args.extend(extra)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                out = g(*args)
                res = ("ok", snap(out))
            except Exception as exc:  # noqa: BLE001
                out = None
                res = ("err", type(exc).__name__, str(exc)[:300])
        warns = [str(x.message)[:200] for x in w]
        if pattern == "tape" and out is not None:
            out.backward()
            with tt.no_grad():
                for prm in model.parameters():
                    if prm.grad is not None:
                        prm.data -= 0.05 * prm.grad
                        prm.grad = None
        if pattern in FUNCTIONAL and res[0] == "ok" and pattern in ("vg", "maml", "dpsgd", "dpsgd_c", "pex"):
            grads = out[1] if pattern in ("vg", "maml") else out
            if pattern == "pex":
                grads = {
                    k: np.asarray(v.data if isinstance(v, tt.Tensor) else v).mean(0) for k, v in grads.items()
                }
            for k, prm in model.named_parameters():
                gk = grads[k]
                gk = np.asarray(gk.data if isinstance(gk, tt.Tensor) else gk)
                if not np.all(np.isfinite(gk)):
                    continue
                prm.data -= (0.05 * gk).astype(prm.data.dtype)
        record.append((i, res, warns, module_state(model)))
    final = (repr(tt.get_rng_state()), np.random.get_state()[1].tobytes(), np.random.get_state()[2])
    ostate = repr(opt.state_dict()) if opt is not None else None
    return record, final, ostate


def compare(layer, lossname, pattern, n_calls=12, switch_at=None):
    eager = run_case(layer, lossname, pattern, n_calls, switch_at, False)
    comp = run_case(layer, lossname, pattern, n_calls, switch_at, True)
    er, cr = eager[0], comp[0]
    for (i, e_res, e_w, e_st), (_, c_res, c_w, c_st) in zip(er, cr):
        if e_res[0] == "err":
            assert c_res[0] == "err" and c_res[1] == e_res[1], (
                f"call {i}: eager raised {e_res}, compiled {c_res}"
            )
            continue
        assert c_res[0] == "ok", f"call {i}: false refusal / error: {c_res}"
        assert c_res == e_res, f"call {i}: outputs differ"
        assert c_st == e_st, f"call {i}: params/grads/buffers differ"
        extra_w = [w for w in c_w if w not in e_w]
        assert not extra_w or c_res == e_res, f"call {i}: warning {extra_w}"
    assert comp[1] == eager[1], "generator states differ"
    assert comp[2] == eager[2], "optimizer state differs"


# ----------------------------------------------------------------------------- the matrix

PATTERNS_ALL = ["vg", "pex", "dpsgd", "hvp", "gn", "maml", "jac", "hess_x", "step", "tape"]


def layer_cases():
    cases = []
    for layer, (_, kind) in LAYERS.items():
        for pat in PATTERNS_ALL:
            if kind == "idx" and pat in ("jac", "hess_x"):
                continue
            if layer in ACTIVATIONS and pat in ("vg", "jac", "step", "tape", "pex"):
                continue
            if layer in ACTIVATIONS and pat == "hess_x" and layer not in ("relu", "gelu", "softplus"):
                continue
            if pat == "jac" and layer not in JAC:
                continue
            if pat == "maml" and layer in ACTIVATIONS and layer not in ("relu", "gelu", "softplus", "prelu"):
                continue
            if pat == "hess_x" and layer not in ACTIVATIONS and layer not in HESS_X:
                continue
            if (
                pat == "pex"
                and layer not in TRAIN_STATE
                and layer not in ("mha_pad", "lstm", "embedding_pad")
            ):
                continue
            if pat == "tape" and layer not in TRAIN_STATE:
                continue
            switch = None
            n = 12
            if layer in TRAIN_STATE and pat in ("step", "tape", "vg", "pex", "maml"):
                switch = {"step": 3, "tape": 10, "vg": 3, "pex": 3, "maml": 10}[pat]
            if layer in ("bn1d_train", "relu", "lstm") and pat in ("step", "vg"):
                n, switch = 42, 40 if layer == "bn1d_train" else switch
            cases.append(
                (layer, "ce_ignore" if layer in ("relu", "conv2d_max", "mha_pad") else "ce", pat, n, switch)
            )
    return cases


def loss_cases():
    cases = []
    for lossname in LOSSES:
        for pat in ["hvp", "gn"]:
            cases.append(("leaky" if "ce" in lossname else "relu", lossname, pat, 12, None))
    return cases


def extra_cases():
    cases = []
    for layer in ["relu", "conv2d_max", "lstm", "mha_pad", "embedding_pad", "layernorm", "gru", "bn2d_eval"]:
        cases.append((layer, "ce_ignore", "dpsgd_c", 12, None))
    for lossname in ["ce_all", "l1", "smooth_l1", "huber", "bce", "kl"]:
        cases.append(("relu", lossname, "dpsgd", 12, None))
    for lossname in ["l1", "smooth_l1", "ce_all", "bce_logits"]:
        cases.append(("relu", lossname, "maml", 12, None))
        cases.append(("relu", lossname, "hess_x", 12, None))
    return cases


ALL = layer_cases() + loss_cases() + extra_cases()
CRASH_VMAP = "crash: compiled raises TypeError under the transform's vmap where eager runs"
XFAIL = {
    "instnorm1d_track-ce-jac": CRASH_VMAP
    + " (np.copyto of running stats on a batched value; eager loops the basis)",
    "instnorm1d_track-ce-hess_x": CRASH_VMAP + " (np.copyto of running stats on a batched value)",
    "mha_pad-ce_ignore-pex": CRASH_VMAP + " (np.asarray() of a batched key_padding_mask in vmap(grad))",
    "mha_pad-ce_ignore-dpsgd": CRASH_VMAP + " (np.asarray() of a batched key_padding_mask)",
    "mha_pad-ce_ignore-dpsgd_c": CRASH_VMAP + " (np.asarray() of a batched key_padding_mask)",
    "mha_causal-ce-dpsgd": CRASH_VMAP + " (np.asarray() of a batched key_padding_mask)",
    "relu-l1-hvp": "false-refusal: L1 loss under hvp refused (_select() given a traced array)",
    "relu-l1-maml": "false-refusal: MAML (grad through an inner grad step) of an L1 loss refused (_select())",
    "relu-l1-hess_x": "false-refusal: input Hessian of an L1 loss refused (_select() given a traced array)",
    "relu-l1-gn": "false-refusal: L1 loss in a Gauss-Newton product refused (_select() given traced array)",
}


# All ten are equal to eager since the round was written: a key_padding_mask batched by tt.vmap is
# left to vmap's rules, an in-place update of a running statistic by a batched value says it is not
# batchable (tt.jacobian loops, as eagerly), and _select takes np.where on Tensors and traced arrays.
XFAIL_WRITTEN, XFAIL = XFAIL, {}
# With NumPy 2.4 (2.4.6 on this machine; it passed on the NumPy the round was written with): a
# NaN's sign in the gradients after the data's NaN reaches a MAML step through attention (the
# guide's "a NaN's sign after training diverged").
XFAIL["mha_pad-ce_ignore-maml"] = "NaN sign bits of in_proj_weight's gradient after a NaN batch (NumPy 2.4)"


def _param(c):
    cid = (
        "-".join(str(v) for v in c[:3]) + (f"-n{c[3]}" if c[3] != 12 else "") + (f"-sw{c[4]}" if c[4] else "")
    )
    if cid in XFAIL:
        return pytest.param(*c, id=cid, marks=pytest.mark.xfail(strict=True, reason=XFAIL[cid]))
    return pytest.param(*c, id=cid)


@pytest.mark.parametrize("layer,lossname,pattern,n_calls,switch_at", [_param(c) for c in ALL])
def test_compile_matches_eager(layer, lossname, pattern, n_calls, switch_at):
    compare(layer, lossname, pattern, n_calls, switch_at)
