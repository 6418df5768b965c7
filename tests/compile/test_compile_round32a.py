"""Round 32a: options, masks, indices, labels and thresholds inside tinytensor, compiled vs eager.

A fresh user's sweep of every option-taking function of ``tt.nn.functional`` (80 specs: losses'
ignore_index / label_smoothing / weight / pos_weight / reduction / delta / beta / log_target,
activations' slopes and thresholds, dropout p and training, one_hot, pad, interpolate, pooling
and unpooling indices, conv strides, normalize / norm eps, scaled_dot_product_attention masks,
is_causal and scale, embedding padding_idx, masks, labels and thresholds computed inside) and of
every option-holding ``tt.nn`` layer (43 attributes changed from outside between calls, masks fed
to MultiheadAttention / TransformerEncoderLayer, train/eval). Options are spelled as Python
numbers, NumPy scalars (float64/int64 and float32/int32), 0-d arrays and 0-d Tensors; they change
on every call, or on the 3rd, 10th or 40th call; each case runs 12 calls (42 for the 40th-call
schedule), forward only, under ``tt.value_and_grad``, with ``backward()`` inside, or with
``backward()`` plus an optimizer step inside. Eager and compiled runs are built twice from the
same seeds and every result, parameter, ``.grad`` and buffer is compared bit for bit (type,
dtype, shape, bytes); where eager raises, compiled must raise the same exception type.

Cases: 578 (468 functional, 110 layer attribute; 16 of them run 42 calls).
Passing: 564. Strict xfails: 14, by class:

* frozen (5): ``F.normalize(dim=...)`` with the dim as a 0-d array or 0-d Tensor: after the dim
  changes, gradients (value_and_grad, backward(), backward()+SGD) keep the recorded dim's:
  normalize_dim-{tensor-c10-vg, tensor-c3-vg, arr0-c3-vg, arr0-c3-bwd, tensor-c3-opt}.
* value (2): ``F.leaky_relu`` with a 0-d array slope under value_and_grad gives another loss and
  gradient on the 2nd call with the same slope (leaky_relu_slope-arr0-c3-vg);
  ``F.kl_div(log_softmax, np.exp(arg), reduction='batchmean')`` under value_and_grad differs in
  the last bits on the first call (kl_log_target-py-every-vg).
* crash (1): ``F.leaky_relu`` with a 0-d array slope and backward() inside raises TypeError
  (astype() got an unexpected keyword argument 'order') where eager runs
  (leaky_relu_slope-arr0-c3-bwd).
* false run (5): eager raises, compiled returns a value: ``F.interpolate(size=0-d array)``
  (TypeError eagerly: interp_size-arr0-{every-fwd, c10-vg, c3-bwd}); ``F.leaky_relu`` with a
  0-d Tensor slope under value_and_grad (AttributeError eagerly:
  leaky_relu_slope-tensor-{c10-vg, c3-vg}).
* type (1): ``F.leaky_relu`` with a 0-d Tensor slope returns, eagerly, a Tensor whose ``.data``
  is a Tensor; compiled returns a plain Tensor (leaky_relu_slope-tensor-every-fwd).

No layer attribute changed from outside differed, and no unlisted refusal was seen.

Since fixed: the 5 frozen cases (a traced 0-d integer given as an operation's axis is a guard on
its value), the leaky_relu slope cases and interpolate's size (an array size is taken eagerly
too, as a Tensor's); 1 remains (kl_div's last bits).
"""

import struct
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import functional as F

# ----------------------------------------------------------------------------------------------
# harness
# ----------------------------------------------------------------------------------------------


def snap(x):
    if isinstance(x, tt.Tensor):
        return ("T", bool(x.requires_grad), snap(x.data))
    if isinstance(x, np.ndarray):
        return ("A", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, np.generic):
        return ("S", type(x).__name__, x.tobytes())
    if isinstance(x, bool):
        return ("b", x)
    if isinstance(x, float):
        return ("f", struct.pack("<d", x))
    if isinstance(x, int):
        return ("i", x)
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(snap(v) for v in x))
    if isinstance(x, dict):
        return ("d", tuple((k, snap(v)) for k, v in x.items()))
    if x is None:
        return ("None",)
    return ("o", type(x).__name__)


def snap_mods(mods):
    out = []
    for m in mods:
        for name, p in m.named_parameters():
            out.append((name, snap(p.data), snap(p.grad)))
        for name, b in m.named_buffers():
            out.append((name, snap(b)))
    return out


def run_one(build, n, compiled):
    np.random.seed(0)
    tt.manual_seed(0)
    st = build()
    f = st["f"]
    g = tt.compile(f) if compiled else f
    rec, msgs = [], []
    for i in range(n):
        args = st["args"](i)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = g(*args)
            rec.append(("ok", snap(r)))
            msgs.append(None)
        except Exception as e:  # noqa: BLE001
            rec.append(("err", type(e).__name__))
            msgs.append(f"{type(e).__name__}: {str(e)[:300]}")
        rec.append(("state", snap_mods(st.get("mods", ()))))
    return rec, msgs


def check(build, n):
    e, em = run_one(build, n, False)
    c, cm = run_one(build, n, True)
    for k, (a, b) in enumerate(zip(e, c)):
        call = k // 2
        if a != b:
            where = "result" if k % 2 == 0 else "parameters/grads/buffers"
            raise AssertionError(
                f"call {call}: {where} differ; eager={em[call]!r} compiled={cm[call]!r}"
            )


# ----------------------------------------------------------------------------------------------
# value spellings and schedules
# ----------------------------------------------------------------------------------------------


def spell(v, kind):
    if isinstance(v, (str, bool)) or v is None:
        return v
    if kind == "py":
        return v
    if kind == "np":
        return np.int64(v) if isinstance(v, int) else np.float64(v)
    if kind == "np32":
        return np.int32(v) if isinstance(v, int) else np.float32(v)
    if kind == "arr0":
        return np.array(v)
    if kind == "tensor":
        return tt.tensor(np.array(v))
    raise ValueError(kind)


def pick(vals, sched, i):
    if sched == "every":
        return vals[i % len(vals)]
    at = {"c3": 2, "c10": 9, "c40": 39}[sched]
    return vals[0] if i < at else vals[1 % len(vals)]


NCALLS = {"every": 12, "c3": 12, "c10": 12, "c40": 42}

# ----------------------------------------------------------------------------------------------
# functional specs: op(h, v, d) on h = Linear(x) (or h = x for "vg"), v the option, d per-call data
# ----------------------------------------------------------------------------------------------

N = 6


def lab(rng, i, c=4, ignore=None, frac=0.3):
    y = rng.integers(0, c, N)
    if ignore is not None:
        y = np.where(rng.random(N) < frac, ignore, y)
    return y


def _img(h, c=2, s=4):
    return h.reshape(N, c, s, s)


SPECS = {}


def spec(name, width, vals, kinds, op, data=lambda rng, i: {}, dyadic=False):
    SPECS[name] = dict(width=width, vals=vals, kinds=kinds, op=op, data=data, dyadic=dyadic)


NUM = ("py", "np", "arr0", "tensor")
INT = ("py", "np", "arr0", "tensor")
STR = ("py",)
SHAPE = ("py", "np", "arr0")  # size-like ints: a 0-d Tensor is refused eagerly too

spec("ce_ignore_index", 4, [1, -100, 3, 0], INT,
     lambda h, v, d: F.cross_entropy(h, d["y"], ignore_index=v),
     lambda rng, i: {"y": lab(rng, i)})
spec("ce_ignore_index_sum", 4, [1, 2, -100], INT,
     lambda h, v, d: F.cross_entropy(h, d["y"], ignore_index=v, reduction="sum"),
     lambda rng, i: {"y": lab(rng, i)})
spec("ce_ignore_index_none", 4, [1, 2, -100], INT,
     lambda h, v, d: F.cross_entropy(h, d["y"], ignore_index=v, reduction="none"),
     lambda rng, i: {"y": lab(rng, i)})
spec("ce_all_ignored_labels", 4, [2, -1], INT,
     lambda h, v, d: F.cross_entropy(h, d["y"] * 0 + 2, ignore_index=v),
     lambda rng, i: {"y": lab(rng, i)})
spec("ce_label_smoothing", 4, [0.0, 0.1, 0.25], NUM,
     lambda h, v, d: F.cross_entropy(h, d["y"], label_smoothing=v),
     lambda rng, i: {"y": lab(rng, i)})
spec("ce_smoothing_with_ignore", 4, [0.0, 0.2], NUM,
     lambda h, v, d: F.cross_entropy(h, d["y"], ignore_index=-100, label_smoothing=v),
     lambda rng, i: {"y": lab(rng, i, ignore=-100)})
spec("ce_reduction", 4, ["mean", "sum", "none"], STR,
     lambda h, v, d: F.cross_entropy(h, d["y"], reduction=v),
     lambda rng, i: {"y": lab(rng, i)})
spec("ce_labels_change_with_ignored", 4, [-100], INT,
     lambda h, v, d: F.cross_entropy(h, d["y"], ignore_index=v),
     lambda rng, i: {"y": lab(rng, i, ignore=-100, frac=0.5 if i % 3 else 1.0)})
spec("ce_weight_arg", 4, [0], ("py",),
     lambda h, v, d: F.cross_entropy(h, d["y"], weight=d["w"]),
     lambda rng, i: {"y": lab(rng, i), "w": rng.random(4).astype(np.float32)})
spec("ce_prob_targets", 4, [0], ("py",),
     lambda h, v, d: F.cross_entropy(h, d["p"]),
     lambda rng, i: {"p": rng.dirichlet(np.ones(4), N).astype(np.float32)})
spec("nll_ignore_index", 4, [0, 3, -100], INT,
     lambda h, v, d: F.nll_loss(F.log_softmax(h, dim=-1), d["y"], ignore_index=v),
     lambda rng, i: {"y": lab(rng, i)})
spec("nll_weight_ignore", 4, [1, 2], INT,
     lambda h, v, d: F.nll_loss(F.log_softmax(h, dim=-1), d["y"], weight=d["w"], ignore_index=v),
     lambda rng, i: {"y": lab(rng, i), "w": rng.random(4).astype(np.float32)})
spec("nll_reduction", 4, ["mean", "sum", "none"], STR,
     lambda h, v, d: F.nll_loss(F.log_softmax(h, dim=-1), d["y"], reduction=v),
     lambda rng, i: {"y": lab(rng, i, ignore=-100)})
spec("bce_logits_pos_weight", 3, [0], ("py",),
     lambda h, v, d: F.binary_cross_entropy_with_logits(h, d["t"], pos_weight=d["pw"]),
     lambda rng, i: {"t": (rng.random((N, 3)) < 0.5).astype(np.float32),
                     "pw": rng.random(3).astype(np.float32) * 3})
spec("bce_logits_weight_reduction", 3, ["mean", "sum", "none"], STR,
     lambda h, v, d: F.binary_cross_entropy_with_logits(h, d["t"], weight=d["w"], reduction=v),
     lambda rng, i: {"t": rng.random((N, 3)).astype(np.float32),
                     "w": rng.random((N, 3)).astype(np.float32)})
spec("bce_weight", 3, ["mean", "sum", "none"], STR,
     lambda h, v, d: F.binary_cross_entropy(tt.sigmoid(h), d["t"], weight=d["w"], reduction=v),
     lambda rng, i: {"t": rng.random((N, 3)).astype(np.float32),
                     "w": rng.random(3).astype(np.float32)})
spec("huber_delta", 3, [1.0, 0.5, 2.0], NUM,
     lambda h, v, d: F.huber_loss(h, d["t"], delta=v),
     lambda rng, i: {"t": rng.standard_normal((N, 3)).astype(np.float32)})
spec("huber_delta_exact_tie", 3, [0.5, 0.25, 1.0], NUM,
     lambda h, v, d: F.huber_loss(h, d["t"], delta=v, reduction="sum"),
     lambda rng, i: {"t": np.zeros((N, 3))}, dyadic=True)
spec("smooth_l1_beta", 3, [1.0, 0.25, 0.0], NUM,
     lambda h, v, d: F.smooth_l1_loss(h, d["t"], beta=v),
     lambda rng, i: {"t": rng.standard_normal((N, 3)).astype(np.float32)})
spec("smooth_l1_beta_exact_tie", 3, [0.5, 0.25], NUM,
     lambda h, v, d: F.smooth_l1_loss(h, d["t"], beta=v, reduction="none"),
     lambda rng, i: {"t": np.zeros((N, 3))}, dyadic=True)
spec("l1_reduction", 3, ["mean", "sum", "none"], STR,
     lambda h, v, d: F.l1_loss(h, d["t"], reduction=v),
     lambda rng, i: {"t": rng.standard_normal((N, 3)).astype(np.float32)})
spec("l1_ties_at_zero", 3, ["mean", "sum"], STR,
     lambda h, v, d: F.l1_loss(h, d["t"], reduction=v),
     lambda rng, i: {"t": np.zeros((N, 3))}, dyadic=True)
spec("mse_reduction", 3, ["mean", "sum", "none"], STR,
     lambda h, v, d: F.mse_loss(h, d["t"], reduction=v),
     lambda rng, i: {"t": rng.standard_normal((N, 3)).astype(np.float32)})
spec("kl_log_target", 4, [False, True], STR,
     lambda h, v, d: F.kl_div(F.log_softmax(h, dim=-1), d["lt"] if v else np.exp(d["lt"]),
                              log_target=v, reduction="batchmean"),
     lambda rng, i: {"lt": np.log(rng.dirichlet(np.ones(4), N)).astype(np.float32)})
spec("kl_reduction", 4, ["mean", "sum", "none", "batchmean"], STR,
     lambda h, v, d: F.kl_div(F.log_softmax(h, dim=-1), d["t"], reduction=v),
     lambda rng, i: {"t": rng.dirichlet(np.ones(4), N).astype(np.float32)})
spec("softplus_beta", 3, [1.0, 2.0, 0.5], NUM, lambda h, v, d: F.softplus(h * 10, beta=v))
spec("softplus_threshold", 3, [20.0, 1.0, 0.5], NUM,
     lambda h, v, d: F.softplus(h * 4, threshold=v))
spec("softplus_threshold_exact", 3, [1.0, 0.5, 0.25], NUM,
     lambda h, v, d: F.softplus(h, threshold=v), dyadic=True)
spec("leaky_relu_slope", 3, [0.01, 0.2, 0.5], NUM, lambda h, v, d: F.leaky_relu(h, v))
spec("elu_alpha", 3, [1.0, 0.5, 2.0], NUM, lambda h, v, d: F.elu(h, alpha=v))
spec("gelu_approximate", 3, ["none", "tanh"], STR, lambda h, v, d: F.gelu(h, approximate=v))
spec("dropout_p", 8, [0.5, 0.2, 0.0], NUM, lambda h, v, d: F.dropout(h, p=v))
spec("dropout_training", 8, [True, False], STR, lambda h, v, d: F.dropout(h, p=0.5, training=v))
spec("dropout2d_p", 32, [0.5, 0.25], NUM, lambda h, v, d: F.dropout2d(_img(h), p=v))
spec("one_hot_num_classes", 4, [4, 5], INT,
     lambda h, v, d: (F.one_hot(d["y"], v)[:, :4] * h).sum(),
     lambda rng, i: {"y": lab(rng, i)})
spec("one_hot_labels", 4, [-1], ("py",),
     lambda h, v, d: (F.one_hot(d["y"], num_classes=4) * h).sum(),
     lambda rng, i: {"y": lab(rng, i)})
spec("pad_value", 32, [0.0, 1.5, -2.0], NUM, lambda h, v, d: F.pad(_img(h), (1, 1, 1, 1), value=v))
spec("pad_mode", 32, ["constant", "reflect", "replicate", "circular"], STR,
     lambda h, v, d: F.pad(_img(h), (1, 2, 1, 0), mode=v))
spec("pad_width", 32, [1, 2, 0], INT, lambda h, v, d: F.pad(_img(h), (v, 1, 0, v)))
spec("interp_scale", 32, [2.0, 3.0, 1.5], SHAPE,
     lambda h, v, d: F.interpolate(_img(h), scale_factor=v, mode="nearest"))
spec("interp_size", 32, [8, 6, 5], SHAPE,
     lambda h, v, d: F.interpolate(_img(h), size=v, mode="bilinear", align_corners=False))
spec("interp_mode", 32, ["nearest", "bilinear", "bicubic"], STR,
     lambda h, v, d: F.interpolate(_img(h), scale_factor=2, mode=v))
spec("interp_align_corners", 32, [True, False], STR,
     lambda h, v, d: F.interpolate(_img(h), size=(7, 7), mode="bilinear", align_corners=v))
spec("max_pool_kernel", 32, [2, 3], SHAPE, lambda h, v, d: F.max_pool2d(_img(h), v, stride=1))
spec("max_pool_ties", 32, [2, 3], SHAPE,
     lambda h, v, d: F.max_pool2d(_img(h), v, stride=1), dyadic=True)
spec("max_pool_unpool", 32, [2], SHAPE,
     lambda h, v, d: F.max_unpool2d(*F.max_pool2d(_img(h), v, return_indices=True), v))
spec("max_pool_return_indices", 32, [True, False], STR,
     lambda h, v, d: F.max_pool2d(_img(h), 2, return_indices=v))
spec("max_pool_padding_ceil", 32, [0, 1], SHAPE,
     lambda h, v, d: F.max_pool2d(_img(h), 3, stride=2, padding=v, ceil_mode=True))
spec("adaptive_avg_size", 32, [2, 3, 1], SHAPE, lambda h, v, d: F.adaptive_avg_pool2d(_img(h), v))
spec("adaptive_max_size_idx", 32, [2, 3], SHAPE,
     lambda h, v, d: F.adaptive_max_pool2d(_img(h), v, return_indices=True))
spec("adaptive_avg1d_size", 32, [3, 5], SHAPE,
     lambda h, v, d: F.adaptive_avg_pool1d(h.reshape(N, 2, 16), v))
spec("avg_pool_divisor", 32, [None, 3, 7], ("py",),
     lambda h, v, d: F.avg_pool2d(_img(h), 2, divisor_override=v))
spec("avg_pool_count_include_pad", 32, [True, False], STR,
     lambda h, v, d: F.avg_pool2d(_img(h), 3, stride=1, padding=1, count_include_pad=v))
spec("conv_stride_padding", 32, [1, 2], SHAPE,
     lambda h, v, d: F.conv2d(_img(h), d["w"], stride=v, padding=v),
     lambda rng, i: {"w": np.full((3, 2, 2, 2), 0.25, np.float32)})
spec("conv_dilation", 32, [1, 2], SHAPE,
     lambda h, v, d: F.conv2d(_img(h), d["w"], dilation=v),
     lambda rng, i: {"w": rng.standard_normal((3, 2, 2, 2)).astype(np.float32)})
spec("conv_transpose_output_padding", 32, [0, 1], SHAPE,
     lambda h, v, d: F.conv_transpose2d(_img(h), d["w"], stride=2, output_padding=v),
     lambda rng, i: {"w": rng.standard_normal((2, 3, 3, 3)).astype(np.float32)})
spec("normalize_p", 4, [2.0, 1.0, 3.0], NUM, lambda h, v, d: F.normalize(h, p=v))
spec("normalize_dim", 4, [1, 0, -1], INT, lambda h, v, d: F.normalize(h, dim=v))
spec("normalize_eps_zero_rows", 4, [1e-12, 1.0], NUM,
     lambda h, v, d: F.normalize(h * d["m"], eps=v),
     lambda rng, i: {"m": (rng.random((N, 1)) < 0.5).astype(np.float32)})
spec("layer_norm_eps", 4, [1e-5, 0.5, 10.0], NUM, lambda h, v, d: F.layer_norm(h, (4,), eps=v))
spec("group_norm_groups", 32, [1, 2], INT, lambda h, v, d: F.group_norm(_img(h), v))
spec("rms_norm_eps", 4, [None, 1e-3, 2.0], ("py",), lambda h, v, d: F.rms_norm(h, (4,), eps=v))
spec("instance_norm_eps", 32, [1e-5, 1.0], NUM, lambda h, v, d: F.instance_norm(_img(h), eps=v))
spec("sdpa_bool_mask", 16, [0], ("py",),
     lambda h, v, d: F.scaled_dot_product_attention(*([h.reshape(2, 2, 3, -1)[..., :4]] * 3),
                                                    attn_mask=d["m"]),
     lambda rng, i: {"m": rng.random((3, 3)) < 0.6 if i % 4 else np.ones((3, 3), bool)})
spec("sdpa_float_mask", 16, [0], ("py",),
     lambda h, v, d: F.scaled_dot_product_attention(*([h.reshape(2, 2, 3, -1)[..., :4]] * 3),
                                                    attn_mask=d["m"]),
     lambda rng, i: {"m": np.where(rng.random((3, 3)) < 0.5, -np.inf, 0.0).astype(np.float32)
                     + np.diag([0.0, 0.0, 0.0]).astype(np.float32)})
spec("sdpa_is_causal", 16, [True, False], STR,
     lambda h, v, d: F.scaled_dot_product_attention(*([h.reshape(2, 2, 3, -1)[..., :4]] * 3),
                                                    is_causal=v))
spec("sdpa_scale", 16, [0.5, 2.0, None], ("py", "np"),
     lambda h, v, d: F.scaled_dot_product_attention(*([h.reshape(2, 2, 3, -1)[..., :4]] * 3),
                                                    scale=v))
spec("sdpa_dropout_p", 16, [0.0, 0.5], NUM,
     lambda h, v, d: F.scaled_dot_product_attention(*([h.reshape(2, 2, 3, -1)[..., :4]] * 3),
                                                    dropout_p=v))
spec("softmax_dim", 4, [-1, 0, 1], INT, lambda h, v, d: F.softmax(h, dim=v))
spec("log_softmax_dim", 4, [-1, 0], INT, lambda h, v, d: F.log_softmax(h, dim=v))
spec("embedding_padding_idx", 4, [0, 2, None], ("py",),
     lambda h, v, d: F.embedding(d["idx"], h, padding_idx=v),
     lambda rng, i: {"idx": rng.integers(0, N, (3, 4))})
spec("embedding_padding_idx_int", 4, [0, 3], INT,
     lambda h, v, d: F.embedding(d["idx"], h, padding_idx=v),
     lambda rng, i: {"idx": rng.integers(0, N, (3, 4))})
spec("prelu_weight", 3, [0], ("py",), lambda h, v, d: F.prelu(h, d["a"]),
     lambda rng, i: {"a": rng.random(3).astype(np.float32)})
spec("threshold_mask_inside", 4, [0.0, 0.5, -0.5], NUM,
     lambda h, v, d: tt.where(h > v, h, h * 0.0))
spec("labels_from_argmax_inside", 4, [0], ("py",),
     lambda h, v, d: F.cross_entropy(h, tt.argmax(tt.tensor(d["x2"]), axis=1)),
     lambda rng, i: {"x2": rng.standard_normal((N, 4))})
spec("ignore_mask_inside", 4, [0.0, 0.3], NUM,
     lambda h, v, d: F.cross_entropy(h, tt.where(tt.tensor(d["s"]) > v, d["y"], -100)),
     lambda rng, i: {"y": lab(rng, i), "s": rng.random(N)})
spec("topk_k", 4, [1, 2, 3], INT, lambda h, v, d: h.topk(v, dim=-1))
spec("masked_fill_value", 4, [0.0, -1e9, 2.5], NUM,
     lambda h, v, d: h.masked_fill(d["m"], v),
     lambda rng, i: {"m": rng.random((N, 4)) < 0.4})
spec("clamp_bounds", 4, [0.5, 0.0, 0.25], NUM, lambda h, v, d: tt.clip(h, -v, v), dyadic=True)
spec("gather_index", 4, [1], ("py",), lambda h, v, d: h.gather(v, d["ix"]),
     lambda rng, i: {"ix": rng.integers(0, 4, (N, 2))})


def make_fn_build(name, kind, sched, mode):
    s = SPECS[name]

    def build():
        rng0 = np.random.default_rng(123)
        lin = nn.Linear(4, s["width"], rng=1)
        if s["dyadic"]:
            lin.weight.data[...] = rng0.integers(-4, 5, lin.weight.data.shape) / 4
            lin.bias.data[...] = 0
        mods = [lin]
        opt = tt.optim.SGD(lin.parameters(), lr=0.125, momentum=0.5) if mode == "opt" else None
        op = s["op"]

        def reduce_(o):
            if isinstance(o, (tuple, list)):
                o = o[0]
            return o.sum() if o.ndim else o

        if mode == "fwd":
            def f(x, v, d):
                return op(lin(x), v, d)
        elif mode == "vg":
            def f(x, v, d):
                return tt.value_and_grad(lambda z: reduce_(op(z, v, d)))(x)
        else:
            def f(x, v, d):
                if opt is not None:
                    opt.zero_grad()
                else:
                    lin.zero_grad()
                out = op(lin(x), v, d)
                loss = reduce_(out)
                loss.backward()
                if opt is not None:
                    opt.step()
                return out

        def args(i):
            rng = np.random.default_rng(1000 + i)
            if s["dyadic"]:
                x = (rng.integers(-4, 5, (N, 4)) / 4).astype(np.float32)
                if mode == "vg":
                    x = (rng.integers(-4, 5, (N, s["width"])) / 4)
            else:
                x = rng.standard_normal((N, 4)).astype(np.float32)
                if mode == "vg":
                    x = rng.standard_normal((N, s["width"]))
            return x, spell(pick(s["vals"], sched, i), kind), s["data"](rng, i)

        return {"f": f, "args": args, "mods": mods}

    return build


FN_CASES = []
for _name, _s in SPECS.items():
    _kinds = _s["kinds"]
    for _k in _kinds:
        if _k == "np" and (_kinds is SHAPE or _name.endswith(("_dim", "_groups", "_k", "_width"))):
            continue  # the NumPy-int spelling of a size is covered by the 0-d array one's refusal
        FN_CASES.append((_name, _k, "every", "fwd" if _k != "py" else "opt"))
    FN_CASES.append((_name, _kinds[0], "c3", "bwd"))
    if not (_kinds == STR and len(_s["vals"]) > 1):
        FN_CASES.append((_name, _kinds[-1], "c10", "vg"))
    if _s["dyadic"] or _name in ("ce_ignore_index", "huber_delta", "softplus_threshold",
                                 "dropout_p", "embedding_padding_idx"):
        FN_CASES.append((_name, _kinds[0], "c40", "opt"))
    if "arr0" in _kinds:
        # a 0-d array or 0-d Tensor option under backward() or value_and_grad
        FN_CASES.append((_name, "arr0", "c3", "bwd"))
        if "tensor" in _kinds:
            FN_CASES.append((_name, "tensor", "c3", "vg"))
    if _kinds == STR and len(_s["vals"]) > 1:
        FN_CASES.append((_name, "py", "every", "vg"))
FN_CASES += [("leaky_relu_slope", "arr0", "c3", "vg"), ("normalize_dim", "arr0", "c3", "vg"),
             ("normalize_dim", "tensor", "c3", "opt"), ("leaky_relu_slope", "np32", "every", "fwd"),
             ("huber_delta", "np32", "every", "opt"), ("softplus_threshold", "np32", "c3", "vg"),
             ("ce_label_smoothing", "np32", "every", "opt"), ("normalize_p", "np32", "c3", "vg")]

XFAIL = {
    "leaky_relu_slope-tensor-every-fwd": "type: eager returns a Tensor wrapping a Tensor for a Tensor "
    "negative_slope, compiled a plain Tensor",
    "leaky_relu_slope-tensor-c10-vg": "false run: eager raises AttributeError for a Tensor negative_slope "
    "under value_and_grad, compiled runs",
    "interp_size-arr0-every-fwd": "false run: eager raises TypeError for a 0-d array size, compiled runs",
    "interp_size-arr0-c10-vg": "false run: eager raises TypeError for a 0-d array size, compiled runs",
    "normalize_dim-tensor-c10-vg": "frozen: F.normalize(dim=0-d Tensor) under value_and_grad keeps the "
    "recorded dim's gradient after the dim changes",
    "normalize_dim-tensor-c3-vg": "frozen: F.normalize(dim=0-d Tensor) under value_and_grad, wrong "
    "gradient from the 3rd call (dim 1 -> 0)",
    "normalize_dim-arr0-c3-vg": "frozen: F.normalize(dim=0-d array) under value_and_grad, wrong "
    "gradient from the 3rd call (dim 1 -> 0)",
    "normalize_dim-arr0-c3-bwd": "frozen: F.normalize(dim=0-d array) with backward() inside, "
    "Linear .grad wrong from the 3rd call",
    "normalize_dim-tensor-c3-opt": "frozen: F.normalize(dim=0-d Tensor) with backward()+SGD inside, "
    ".grad and parameters wrong from the 3rd call",
    "kl_log_target-py-every-vg": "value: kl_div(log_softmax, np.exp(arg), batchmean) under "
    "value_and_grad differs in the last bits of the loss on the first call",
    "leaky_relu_slope-arr0-c3-vg": "value: F.leaky_relu(slope=0-d array) under value_and_grad: the "
    "2nd call (same slope) gives another loss and a gradient of 1 where eager gives the slope",
    "leaky_relu_slope-arr0-c3-bwd": "crash: F.leaky_relu(slope=0-d array) with backward() inside "
    "raises TypeError (astype() got an unexpected keyword argument 'order') where eager runs",
    "leaky_relu_slope-tensor-c3-vg": "false run: eager raises AttributeError for a Tensor "
    "negative_slope under value_and_grad, compiled runs",
    "interp_size-arr0-c3-bwd": "false run: eager raises TypeError for a 0-d array size, compiled runs",
}
# Fixed since the round was written: leaky_relu takes a 0-d Tensor slope (an array argument inside
# tt.compile) by its value; eager then runs with a Tensor slope too, as compiled does.
# And a traced 0-d integer given to an operation as its axis (normalize's dim) is a guard on its
# value, so the rules' shapes follow it.
# And F.interpolate takes a size given as a NumPy array (0-d or 1-d) eagerly too, as a Tensor.
# And kl_div's last bits (0-d arithmetic is the ufunc in the program, as eagerly).
XFAIL = {k: v for k, v in XFAIL.items()
         if not k.startswith(("leaky_relu_slope", "normalize_dim", "interp_size",
                              "kl_log_target-py-every-vg"))}


def _param(case, xf):
    cid = "-".join(case)
    if cid in xf:
        return pytest.param(*case, id=cid, marks=pytest.mark.xfail(strict=True, reason=xf[cid]))
    return pytest.param(*case, id=cid)


@pytest.mark.parametrize("name,kind,sched,mode", [_param(c, XFAIL) for c in FN_CASES])
def test_functional_option(name, kind, sched, mode):
    check(make_fn_build(name, kind, sched, mode), NCALLS[sched])


# ----------------------------------------------------------------------------------------------
# layers whose attribute is changed outside, between calls
# ----------------------------------------------------------------------------------------------

LAYERS = {}


def layer(name, make, attr, vals, fwd, width=4, data=lambda rng, i: {}):
    LAYERS[name] = dict(make=make, attr=attr, vals=vals, fwd=fwd, width=width, data=data)


def _y(rng, i, ign=-100):
    return {"y": lab(rng, i, ignore=ign)}


layer("CrossEntropyLoss.ignore_index", lambda: nn.CrossEntropyLoss(), "ignore_index",
      [-100, 1, 2], lambda m, h, d: m(h, d["y"]), data=lambda rng, i: _y(rng, i, 3))
layer("CrossEntropyLoss.label_smoothing", lambda: nn.CrossEntropyLoss(), "label_smoothing",
      [0.0, 0.3], lambda m, h, d: m(h, d["y"]), data=_y)
layer("CrossEntropyLoss.reduction", lambda: nn.CrossEntropyLoss(), "reduction",
      ["mean", "sum", "none"], lambda m, h, d: m(h, d["y"]), data=_y)
layer("CrossEntropyLoss.weight", lambda: nn.CrossEntropyLoss(), "weight",
      [None, np.array([1.0, 2.0, 0.5, 0.0], np.float32)], lambda m, h, d: m(h, d["y"]), data=_y)
layer("NLLLoss.ignore_index", lambda: nn.NLLLoss(), "ignore_index", [-100, 0, 3],
      lambda m, h, d: m(F.log_softmax(h, dim=-1), d["y"]), data=lambda rng, i: _y(rng, i, 0))
layer("NLLLoss.reduction", lambda: nn.NLLLoss(), "reduction", ["mean", "sum"],
      lambda m, h, d: m(F.log_softmax(h, dim=-1), d["y"]), data=_y)
layer("HuberLoss.delta", lambda: nn.HuberLoss(), "delta", [1.0, 0.1, 3.0],
      lambda m, h, d: m(h, d["t"]), data=lambda rng, i: {"t": rng.standard_normal((N, 4))})
layer("SmoothL1Loss.beta", lambda: nn.SmoothL1Loss(), "beta", [1.0, 0.1, 0.0],
      lambda m, h, d: m(h, d["t"]), data=lambda rng, i: {"t": rng.standard_normal((N, 4))})
layer("MSELoss.reduction", lambda: nn.MSELoss(), "reduction", ["mean", "sum"],
      lambda m, h, d: m(h, d["t"]), data=lambda rng, i: {"t": rng.standard_normal((N, 4))})
layer("L1Loss.reduction", lambda: nn.L1Loss(), "reduction", ["mean", "none"],
      lambda m, h, d: m(h, d["t"]), data=lambda rng, i: {"t": rng.standard_normal((N, 4))})
layer("BCEWithLogitsLoss.pos_weight", lambda: nn.BCEWithLogitsLoss(), "pos_weight",
      [None, np.array([1.0, 3.0, 0.5, 2.0], np.float32)], lambda m, h, d: m(h, d["t"]),
      data=lambda rng, i: {"t": (rng.random((N, 4)) < 0.5).astype(np.float32)})
layer("BCELoss.weight", lambda: nn.BCELoss(), "weight",
      [None, np.array([1.0, 3.0, 0.5, 2.0], np.float32)],
      lambda m, h, d: m(tt.sigmoid(h), d["t"]),
      data=lambda rng, i: {"t": rng.random((N, 4)).astype(np.float32)})
layer("KLDivLoss.log_target", lambda: nn.KLDivLoss(reduction="sum"), "log_target", [False, True],
      lambda m, h, d: m(F.log_softmax(h, dim=-1), d["t"]),
      data=lambda rng, i: {"t": rng.dirichlet(np.ones(4), N)})
layer("LeakyReLU.negative_slope", lambda: nn.LeakyReLU(), "negative_slope", [0.01, 0.3, 1.0],
      lambda m, h, d: m(h))
layer("ELU.alpha", lambda: nn.ELU(), "alpha", [1.0, 0.25], lambda m, h, d: m(h))
layer("GELU.approximate", lambda: nn.GELU(), "approximate", ["none", "tanh"], lambda m, h, d: m(h))
layer("Softplus.beta", lambda: nn.Softplus(), "beta", [1.0, 3.0], lambda m, h, d: m(h * 8))
layer("Softplus.threshold", lambda: nn.Softplus(), "threshold", [20.0, 0.5], lambda m, h, d: m(h))
layer("Dropout.p", lambda: nn.Dropout(0.5), "p", [0.5, 0.1, 0.0], lambda m, h, d: m(h), width=8)
layer("Dropout.training", lambda: nn.Dropout(0.5), "training", [True, False],
      lambda m, h, d: m(h), width=8)
layer("Dropout2d.p", lambda: nn.Dropout2d(0.5), "p", [0.5, 0.25], lambda m, h, d: m(_img(h)),
      width=32)
layer("Embedding.padding_idx", lambda: nn.Embedding(6, 3, padding_idx=0, rng=2), "padding_idx",
      [0, 2, None], lambda m, h, d: m(d["idx"]) * h[:, None, :3].sum(),
      data=lambda rng, i: {"idx": rng.integers(0, 6, (N, 5))})
layer("Upsample.scale_factor", lambda: nn.Upsample(scale_factor=2), "scale_factor", [2, 3],
      lambda m, h, d: m(_img(h)), width=32)
layer("Upsample.mode", lambda: nn.Upsample(scale_factor=2), "mode", ["nearest", "bilinear"],
      lambda m, h, d: m(_img(h)), width=32)
layer("MaxPool2d.kernel_size", lambda: nn.MaxPool2d(2), "kernel_size", [2, 3],
      lambda m, h, d: m(_img(h)), width=32)
layer("MaxPool2d.stride", lambda: nn.MaxPool2d(2), "stride", [2, 1],
      lambda m, h, d: m(_img(h)), width=32)
layer("AvgPool2d.padding", lambda: nn.AvgPool2d(3, stride=1), "padding", [0, 1],
      lambda m, h, d: m(_img(h)), width=32)
layer("AdaptiveAvgPool2d.output_size", lambda: nn.AdaptiveAvgPool2d(2), "output_size", [2, 1, 3],
      lambda m, h, d: m(_img(h)), width=32)
layer("Flatten.start_dim", lambda: nn.Flatten(), "start_dim", [1, 2],
      lambda m, h, d: m(_img(h)).sum(axis=-1), width=32)
layer("Softmax.dim", lambda: nn.Softmax(dim=-1), "dim", [-1, 0], lambda m, h, d: m(h))
layer("LayerNorm.eps", lambda: nn.LayerNorm(4), "eps", [1e-5, 1.0], lambda m, h, d: m(h))
layer("RMSNorm.eps", lambda: nn.RMSNorm(4), "eps", [None, 0.5], lambda m, h, d: m(h))
layer("GroupNorm.eps", lambda: nn.GroupNorm(1, 2), "eps", [1e-5, 2.0],
      lambda m, h, d: m(_img(h)), width=32)
layer("BatchNorm1d.momentum", lambda: nn.BatchNorm1d(4), "momentum", [0.1, 0.9, None],
      lambda m, h, d: m(h))
layer("BatchNorm1d.eps", lambda: nn.BatchNorm1d(4), "eps", [1e-5, 1.0], lambda m, h, d: m(h))
layer("BatchNorm1d.training", lambda: nn.BatchNorm1d(4), "training", [True, False],
      lambda m, h, d: m(h))
layer("PReLU.weight_data", lambda: nn.PReLU(), "weight.data", [0.25, -0.5], lambda m, h, d: m(h))
layer("MultiheadAttention.key_padding_mask", lambda: nn.MultiheadAttention(4, 2, rng=3,
      batch_first=True), None, [0],
      lambda m, h, d: m(h.reshape(2, 3, 4), h.reshape(2, 3, 4), h.reshape(2, 3, 4),
                        key_padding_mask=d["m"])[0],
      data=lambda rng, i: {"m": np.array([[False, rng.random() < 0.5, True],
                                          [rng.random() < 0.5, False, False]])})
layer("MultiheadAttention.attn_mask", lambda: nn.MultiheadAttention(4, 2, rng=3,
      batch_first=True), None, [0],
      lambda m, h, d: m(h.reshape(2, 3, 4), h.reshape(2, 3, 4), h.reshape(2, 3, 4),
                        attn_mask=d["m"])[1],
      data=lambda rng, i: {"m": (rng.random((3, 3)) < 0.5) & ~np.eye(3, dtype=bool)})
layer("MultiheadAttention.is_causal", lambda: nn.MultiheadAttention(4, 2, rng=3,
      batch_first=True), "_causal", [False, True],
      lambda m, h, d: m(h.reshape(2, 3, 4), h.reshape(2, 3, 4), h.reshape(2, 3, 4),
                        attn_mask=np.triu(np.ones((3, 3), bool), 1) if m._causal else None,
                        is_causal=m._causal)[0])
layer("TransformerEncoderLayer.src_key_padding_mask",
      lambda: nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0, rng=4,
                                         batch_first=True), None, [0],
      lambda m, h, d: m(h.reshape(2, 3, 4), src_key_padding_mask=d["m"]),
      data=lambda rng, i: {"m": np.array([[False, False, rng.random() < 0.5],
                                          [False, rng.random() < 0.5, True]])})
layer("TransformerEncoderLayer.dropout_train_eval",
      lambda: nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.3, rng=4,
                                         batch_first=True), "training", [True, False],
      lambda m, h, d: m(h.reshape(2, 3, 4)))
layer("LSTM.hx_from_data", lambda: nn.LSTM(4, 3, batch_first=True, rng=5), None, [0],
      lambda m, h, d: m(h.reshape(2, 3, 4), (d["h0"], d["c0"]))[0],
      data=lambda rng, i: {"h0": rng.standard_normal((1, 2, 3)).astype(np.float32),
                           "c0": rng.standard_normal((1, 2, 3)).astype(np.float32)})


def _set(m, attr, v):
    if attr == "weight.data":
        m.weight.data[...] = v
    elif attr in ("kernel_size", "stride"):
        setattr(m, attr, (v, v))
    elif attr == "training":
        m.train(v)
    elif attr is not None:
        setattr(m, attr, v)


def make_layer_build(name, sched, mode):
    s = LAYERS[name]

    def build():
        lin = nn.Linear(4, s["width"], rng=1)
        m = s["make"]()
        if s["attr"] == "_causal":
            m._causal = False
        mods = [lin, m]
        params = list(lin.parameters()) + list(m.parameters())
        opt = tt.optim.Adam(params, lr=0.01) if mode == "opt" else None

        if mode == "fwd":
            def f(x, d):
                return s["fwd"](m, lin(x), d)
        else:
            def f(x, d):
                if opt is not None:
                    opt.zero_grad()
                else:
                    lin.zero_grad()
                    m.zero_grad()
                out = s["fwd"](m, lin(x), d)
                loss = out.sum() if out.ndim else out
                loss.backward()
                if opt is not None:
                    opt.step()
                return out

        def args(i):
            if s["attr"] is not None:
                _set(m, s["attr"], pick(s["vals"], sched, i))
            rng = np.random.default_rng(2000 + i)
            return rng.standard_normal((N, 4)).astype(np.float32), s["data"](rng, i)

        return {"f": f, "args": args, "mods": mods}

    return build


LAYER_CASES = []
for _name in LAYERS:
    LAYER_CASES.append((_name, "every", "fwd"))
    LAYER_CASES.append((_name, "c3", "opt"))
    if _name.startswith(("CrossEntropy", "NLL", "Huber", "SmoothL1", "Softplus", "Dropout.", "Embedding",
                         "BatchNorm", "LeakyReLU", "BCEWith", "MultiheadAttention.key")):
        LAYER_CASES.append((_name, "c10", "bwd"))
for _name in ("CrossEntropyLoss.ignore_index", "Dropout.p", "HuberLoss.delta",
              "Embedding.padding_idx", "BatchNorm1d.momentum"):
    LAYER_CASES.append((_name, "c40", "opt"))

LAYER_XFAIL = {
    "kl_log_target-py-c10-vg": "value: kl_div(log_softmax, np.exp(arg), batchmean) under "
    "value_and_grad differs in the last bits of the loss on the first call",
    "leaky_relu_slope-tensor-every-fwd": "type: eager returns a Tensor wrapping a Tensor for a Tensor "
    "negative_slope, compiled a plain Tensor",
    "leaky_relu_slope-tensor-c10-vg": "false run: eager raises AttributeError for a Tensor negative_slope "
    "under value_and_grad, compiled runs",
    "interp_size-arr0-every-fwd": "false run: eager raises TypeError for a 0-d array size, compiled runs",
    "interp_size-arr0-c10-vg": "false run: eager raises TypeError for a 0-d array size, compiled runs",
    "normalize_dim-tensor-c10-vg": "frozen: F.normalize(dim=0-d Tensor) under value_and_grad keeps the "
    "recorded dim's gradient after the dim changes",
    "normalize_dim-tensor-c3-vg": "frozen: F.normalize(dim=0-d Tensor) under value_and_grad, wrong "
    "gradient from the 3rd call (dim 1 -> 0)",
    "normalize_dim-arr0-c3-vg": "frozen: F.normalize(dim=0-d array) under value_and_grad, wrong "
    "gradient from the 3rd call (dim 1 -> 0)",
    "normalize_dim-arr0-c3-bwd": "frozen: F.normalize(dim=0-d array) with backward() inside, "
    "Linear .grad wrong from the 3rd call",
    "normalize_dim-tensor-c3-opt": "frozen: F.normalize(dim=0-d Tensor) with backward()+SGD inside, "
    ".grad and parameters wrong from the 3rd call",
    "kl_log_target-py-every-vg": "value: kl_div(log_softmax, np.exp(arg), batchmean) under "
    "value_and_grad differs in the last bits of the loss on the first call",
    "leaky_relu_slope-arr0-c3-vg": "value: F.leaky_relu(slope=0-d array) under value_and_grad: the "
    "2nd call (same slope) gives another loss and a gradient of 1 where eager gives the slope",
    "leaky_relu_slope-arr0-c3-bwd": "crash: F.leaky_relu(slope=0-d array) with backward() inside "
    "raises TypeError (astype() got an unexpected keyword argument 'order') where eager runs",
    "leaky_relu_slope-tensor-c3-vg": "false run: eager raises AttributeError for a Tensor "
    "negative_slope under value_and_grad, compiled runs",
    "interp_size-arr0-c3-bwd": "false run: eager raises TypeError for a 0-d array size, compiled runs",
}


@pytest.mark.parametrize("name,sched,mode", [_param(c, LAYER_XFAIL) for c in LAYER_CASES])
def test_layer_attribute(name, sched, mode):
    check(make_layer_build(name, sched, mode), NCALLS[sched])
