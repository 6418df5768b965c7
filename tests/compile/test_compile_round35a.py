"""Round 35a: the documentation's own code, varied.

Written by a fresh user who knows torch.compile (Dynamo guards, graph breaks) and jax.jit,
from the documentation only (README.md, docs/guides, docs/api, examples/ and docstrings; no
implementation and no other test was read). Every code example in the docs and the examples
was run as a user adapts it, eagerly and through `tt.compile`, in two independent worlds (same
seed, separate models), over 12 calls (42 where a value changes on the 40th), with the values
the code reads changing on the 3rd, 10th and 40th call; outputs, parameters, gradients,
buffers, optimizer and scheduler state are compared bit for bit (type, dtype, shape, bytes;
floats by their bits), the eager world is run twice first to prove determinism, and where
eager raises the compiled function must raise the same type.

313 cases: 304 pass, 9 strict xfails.

Test functions:
* test_logreg_value_and_grad_penalty_sources (60): the guide's first example,
  `tt.compile(tt.value_and_grad(loss))` of the lecture's logistic regression, with a penalty
  weight read from a global, a NumPy scalar global, a 0-d array (rebound / written in place), a
  Tensor (`.data =` / in place), a dict, a config attribute, a closure cell and a list, and
  W, x, y handed over as arrays, Tensors, float32, keywords, integer labels, a Tensor W.
* test_functional_sgd_step_lr_spellings (20): the guide's `sgd_step` with the learning rate as
  a float, np.float64, np.float32, 0-d array, 0-d Tensor, keyword, in a dict/tuple/list, an int.
* test_guide_hvp_with_changing_data (4): the guide's compiled hvp with its data closed over and
  written in place, held in a dict and rebound, held as a Tensor, or passed.
* test_object_style_functional_call (30): the guide's object style (functional_call, gradients
  handed to the parameters, the optimizer outside) for six optimizers, with lr set by hand, a
  scheduler, `model.to(np.float64)` and `load_state_dict` between calls.
* test_whole_step_optimizer_scheduler (40), test_whole_step_values_read (15),
  test_guide_train_step_one_program (1): the guide's whole training step with every optimizer
  and scheduler; a clip norm from a global or an attribute, clip_grad_value_, Dropout,
  BatchNorm, train/eval toggled, label smoothing changed, a forward hook added and removed,
  lr written outside, `weight.data` rebound, labels as lists or one-hot, x as a Tensor or a list.
* test_transforms_guide_compiled (90): each example of the transforms guide (grad,
  value_and_grad, vjp, jvp, jacobian rev/fwd, hvp, hessian, nested grad, has_aux, argnums,
  vmap with in_axes/out_axes, vmap of jacobian/hessian/hvp/jvp/vjp, grad of vmap) compiled,
  inputs as arrays, Tensors, float32, and for functions of one number as float, NumPy scalar,
  list (a Python float).
* test_tape_and_pytorch_guides (16), test_std_ambiguous_warning_once_per_line (1): the tape
  guide's backward with a cotangent, accumulation, jvp, no_grad; "Coming from PyTorch": in-place
  chains, manual SGD steps, `max(dim=)` pairs, topk, std/var estimators, pads, split/chunk,
  scatter_add, masked_fill; the ambiguous-std warning count.
* test_documented_examples_compiled (36): the training guide (BCEWithLogits pos_weight and
  CrossEntropy weight/ignore_index/label_smoothing changed, AdamW groups + cosine + clip, the
  CNN with BatchNorm2d and Dropout, load_state_dict of a held state dict, functional_call with
  grad/hvp/jacobian), the guide's predict guard and taped step, and the examples (the GP's
  negative log posterior, DP-SGD's private gradient, Newton's hvp, a tiny GPT step with
  dropout and weight tying, generation with a temperature, train_mlp's compiled_step,
  ReduceLROnPlateau, logistic_regression's loop with wengert_list, a U-Net block step,
  minibatches with a seed, Dropout's rng in state_dict).

Strict xfails, by class:
* An intermediate Tensor kept from inside a transform (appended to a list by the
  differentiated function and returned next to the gradient, as examples/train_mlp.py's own
  `compiled_step` does with its logits) is a Tensor that requires grad eagerly and a plain
  ndarray compiled (same bytes, different type): train_mlp_logits_closure, leak_grad,
  leak_value_and_grad.
* `tt.hessian` of a function of one value returns a 0-d ndarray eagerly and a NumPy scalar
  compiled (the known gap the guide lists, seen here the other way round from its wording and
  also for 0-d array, Tensor and float32 arguments): hessian_scalar-array, -tensor, -list,
  -float, -npscalar, -f32.

Since fixed: all 9 (a 0-d array result stays a 0-d array; a Tensor kept from inside a
transform comes back a Tensor that requires grad, its backward() refused).
"""

import struct
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import functional as F
from tinytensor.scipy import stats

# ---------------------------------------------------------------------------------------------
# The harness: two independent worlds (eager, compiled), same seed, compared bit for bit.
# ---------------------------------------------------------------------------------------------


def canon(x, depth=0):
    """A hashable, bit-exact description of a value: type, dtype, shape, bytes."""
    if depth > 12:
        return ("deep",)
    if isinstance(x, tt.Tensor):
        return ("Tensor", bool(x.requires_grad), canon(np.asarray(x.data), depth + 1))
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return ("ndobj", x.shape, tuple(canon(v, depth + 1) for v in x.ravel()))
        return ("ndarray", x.dtype.str, x.shape, np.ascontiguousarray(x).tobytes())
    if isinstance(x, np.generic):
        return ("npscalar", type(x).__name__, x.dtype.str, np.asarray(x).tobytes())
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return (type(x).__name__, x)
    if isinstance(x, int):
        return ("int", int(x))
    if isinstance(x, float):
        return ("float", struct.pack("<d", x))
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("namedtuple", type(x).__name__, tuple(canon(v, depth + 1) for v in x))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(canon(v, depth + 1) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((repr(k), canon(v, depth + 1)) for k, v in x.items()))
    return ("obj", type(x).__name__)


def model_state(*objs):
    """Parameters (data and grad), buffers, optimizer and scheduler state of the given objects."""
    out = []
    for o in objs:
        if isinstance(o, nn.Module):
            for name, p in o.named_parameters():
                out.append((name, canon(p.data), canon(p.grad)))
            for name, b in o.named_buffers():
                out.append((name, canon(b.data)))
            out.append(("training", tuple(m.training for m in o.modules())))
        elif isinstance(o, tt.Tensor):
            out.append(("T", canon(o.data), canon(o.grad)))
        elif hasattr(o, "param_groups") and hasattr(o, "state_dict"):
            out.append(("opt", canon(o.state_dict())))
        elif hasattr(o, "get_last_lr"):
            out.append(("sched", canon(o.get_last_lr()), canon(o.state_dict())))
        elif isinstance(o, np.random.Generator):
            out.append(("gen", repr(o.bit_generator.state)))
        else:
            out.append(canon(o))
    return out


def run_world(make, n, compiled, fuse=False):
    tt.manual_seed(1234)
    np.random.seed(99)
    w = make()
    fn = w["fn"]
    if compiled:
        fn = tt.compile(fn, fuse=fuse) if fuse else tt.compile(fn)
    results = []
    refusals = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(n):
            try:
                r = w["call"](fn, k)
                results.append(("ok", canon(r), model_state(*w.get("state", lambda: [])())))
            except Exception as e:  # noqa: BLE001 - the exception type is compared
                msg = str(e)
                if compiled and "tt.compile" in msg:
                    refusals.append(msg.splitlines()[0][:200])
                results.append(("raise", type(e).__name__))
    return results, refusals, fn


def check(make, n=12, refusal_ok=False, fuse=False):
    e1, _, _ = run_world(make, n, False)
    e2, _, _ = run_world(make, n, False)
    assert e1 == e2, "the eager world is not deterministic: a test bug"
    c, refusals, fn = run_world(make, n, True, fuse=fuse)
    if refusals and refusal_ok:
        return fn
    assert not refusals, f"refused: {refusals[0]}"
    for k, (a, b) in enumerate(zip(e1, c)):
        assert a == b, f"call {k + 1} differs (eager {a[0]}, compiled {b[0]})"
    assert len(e1) == len(c)
    return fn


def phase(k):
    """0 before the 3rd call, 1 from the 3rd, 2 from the 10th, 3 from the 40th."""
    return 0 if k < 2 else 1 if k < 9 else 2 if k < 39 else 3


def xf(reason):
    return pytest.mark.xfail(strict=True, reason=reason)


G = {}  # globals the cases read, reset by each world


# ---------------------------------------------------------------------------------------------
# 1. The compile guide's first example: tt.compile(tt.value_and_grad(loss)), the lecture's
#    logistic regression, with a penalty weight read in every way and changing on calls 3/10/40,
#    and W, x, y handed over in every spelling.
# ---------------------------------------------------------------------------------------------

LAMS = [1e-3, 0.5, 0.0, 2.0]
LAM = 1e-3
LAM_NP = np.float64(1e-3)
LAM_0D = np.array(1e-3)
LAM_T = tt.tensor(1e-3)


class Cfg:
    lam = 1e-3


def _set_lam(src, cell, v):
    global LAM, LAM_NP, LAM_0D, LAM_T
    if src == "global":
        LAM = v
    elif src == "np64":
        LAM_NP = np.float64(v)
    elif src == "0d_rebind":
        LAM_0D = np.array(v)
    elif src == "0d_inplace":
        LAM_0D[...] = v
    elif src == "tensor_data":
        LAM_T.data = np.array(v)
    elif src == "tensor_inplace":
        LAM_T.data[...] = v
    elif src == "dict":
        G["lam"] = v
    elif src == "cfg":
        cell["cfg"].lam = v
    elif src == "closure":
        cell["set"](v)
    elif src == "list":
        cell["lst"][0] = v


def _lam_loss(src, cell):
    if src == "global":
        return lambda: LAM
    if src == "np64":
        return lambda: LAM_NP
    if src in ("0d_rebind", "0d_inplace"):
        return lambda: LAM_0D
    if src in ("tensor_data", "tensor_inplace"):
        return lambda: LAM_T
    if src == "dict":
        return lambda: G["lam"]
    if src == "cfg":
        return lambda: cell["cfg"].lam
    if src == "list":
        return lambda: cell["lst"][0]
    lam = 1e-3

    def setter(v):
        nonlocal lam
        lam = v

    cell["set"] = setter
    return lambda: lam


def make_logreg(src, how, lr=0.1):
    def make():
        global LAM, LAM_NP, LAM_0D, LAM_T
        LAM, LAM_NP, LAM_0D, LAM_T = 1e-3, np.float64(1e-3), np.array(1e-3), tt.tensor(1e-3)
        G["lam"] = 1e-3
        cell = {"cfg": Cfg(), "lst": [1e-3]}
        cell["cfg"].lam = 1e-3
        get = _lam_loss(src, cell)

        def loss(W, x, y):
            return tt.crossEntropy(tt.softmax(tt.dot(x, W)), y) + get() * tt.frobeniusNorm(W)

        rng = np.random.default_rng(0)
        dt = np.float32 if how == "float32" else np.float64
        st = {"W": rng.standard_normal((4, 3)).astype(dt)}

        def call(fn, k):
            _set_lam(src, cell, LAMS[phase(k)])
            r = np.random.default_rng(100 + k)
            x = r.standard_normal((5, 4)).astype(dt)
            lab = r.integers(0, 3, 5)
            y = np.eye(3, dtype=dt)[lab]
            W = st["W"]
            if how == "tensor":
                out = fn(W, tt.tensor(x), tt.tensor(y))
            elif how == "list":
                out = fn(W, x.tolist(), y.tolist())
            elif how == "kwargs":
                out = fn(W, y=y, x=x)
            elif how == "intlabels":
                out = fn(W, x, lab)
            elif how == "Wtensor":
                out = fn(tt.tensor(W), x, y)
            else:
                out = fn(W, x, y)
            value, g = out
            st["W"] = W - lr * np.asarray(g.data if isinstance(g, tt.Tensor) else g)
            return out

        return {"fn": tt.value_and_grad(loss), "call": call, "state": lambda: [st["W"]]}

    return make


LAM_SRCS = ["global", "np64", "0d_rebind", "0d_inplace", "tensor_data", "tensor_inplace",
            "dict", "cfg", "closure", "list"]
HOWS = ["array", "tensor", "float32", "kwargs", "intlabels", "Wtensor"]

LOGREG_XFAIL = {}


def _logreg_params():
    out = []
    for src in LAM_SRCS:
        for how in HOWS:
            cid = f"{src}-{how}"
            marks = [xf(LOGREG_XFAIL[cid])] if cid in LOGREG_XFAIL else []
            out.append(pytest.param(src, how, id=cid, marks=marks))
    return out


@pytest.mark.parametrize("src,how", _logreg_params())
def test_logreg_value_and_grad_penalty_sources(src, how):
    long_run = how == "array" and src in ("global", "closure", "tensor_inplace")
    check(make_logreg(src, how), n=42 if long_run else 12)


# ---------------------------------------------------------------------------------------------
# 2. The guide's functional sgd_step (value_and_grad inside, the update in the program) with the
#    learning rate handed over in every spelling, changing on calls 3/10/40; and its hvp.
# ---------------------------------------------------------------------------------------------

LRS = [0.1, 0.05, 0.2, 0.0125]


def mlp_loss(params, x, y):
    h = tt.tanh(tt.linear(x, params["W1"], params["b1"]))
    return tt.mean(tt.square(tt.linear(h, params["W2"], params["b2"]) - y))


def _mlp_params(rng, dt=np.float64):
    return {"W1": rng.standard_normal((2, 16)).astype(dt), "b1": np.zeros(16, dt),
            "W2": rng.standard_normal((16, 1)).astype(dt), "b2": np.zeros(1, dt)}


def _lr_spell(how, v):
    return {"float": lambda: v, "np64": lambda: np.float64(v), "np32": lambda: np.float32(v),
            "0d": lambda: np.array(v), "tensor0d": lambda: tt.tensor(v),
            "kw": lambda: v, "dict": lambda: {"lr": v}, "tuple": lambda: (v, 0.9),
            "list": lambda: [v], "int": lambda: int(v > 0.06)}[how]()


def make_sgd_step(how, dt=np.float64):
    def make():
        def sgd_step(params, x, y, lr):
            if how == "dict":
                lr = lr["lr"]
            elif how in ("tuple", "list"):
                lr = lr[0]
            value, grads = tt.value_and_grad(mlp_loss)(params, x, y)
            return value, {k: params[k] - lr * grads[k] for k in params}

        def kw_step(params, x, y, *, lr=0.1):
            return sgd_step(params, x, y, lr)

        rng = np.random.default_rng(0)
        st = {"p": _mlp_params(rng, dt)}

        def call(fn, k):
            r = np.random.default_rng(7 + k)
            xb, yb = r.standard_normal((8, 2)).astype(dt), r.standard_normal((8, 1)).astype(dt)
            lr = _lr_spell(how, LRS[phase(k)])
            out = fn(st["p"], xb, yb, lr=lr) if how == "kw" else fn(st["p"], xb, yb, lr)
            st["p"] = {kk: np.asarray(v.data if isinstance(v, tt.Tensor) else v)
                       for kk, v in out[1].items()}
            return out

        return {"fn": kw_step if how == "kw" else sgd_step, "call": call}

    return make


SGD_HOWS = ["float", "np64", "np32", "0d", "tensor0d", "kw", "dict", "tuple", "list", "int"]


@pytest.mark.parametrize("how", SGD_HOWS)
@pytest.mark.parametrize("dt", [np.float64, np.float32], ids=["f64", "f32"])
def test_functional_sgd_step_lr_spellings(how, dt):
    check(make_sgd_step(how, dt), n=42 if dt is np.float64 else 12)


def make_hvp(hold):
    def make():
        rng = np.random.default_rng(0)
        params = _mlp_params(rng)
        xb0, yb0 = rng.standard_normal((16, 2)), rng.standard_normal((16, 1))
        cell = {"xb": xb0.copy(), "yb": yb0.copy()}
        xb, yb = cell["xb"], cell["yb"]
        XB_T = tt.tensor(xb0.copy())

        if hold == "closure_inplace":
            def f(p, v):
                return tt.hvp(lambda W: mlp_loss({**p, "W1": W}, xb, yb), (p["W1"],), (v,))
        elif hold == "dict_rebind":
            def f(p, v):
                return tt.hvp(lambda W: mlp_loss({**p, "W1": W}, cell["xb"], cell["yb"]),
                              (p["W1"],), (v,))
        elif hold == "tensor":
            def f(p, v):
                return tt.hvp(lambda W: mlp_loss({**p, "W1": W}, XB_T, yb), (p["W1"],), (v,))
        else:
            def f(p, v, xb, yb):
                return tt.hvp(lambda W: mlp_loss({**p, "W1": W}, xb, yb), (p["W1"],), (v,))

        def call(fn, k):
            ph = phase(k)
            r = np.random.default_rng(ph)
            newx = r.standard_normal((16, 2))
            if hold == "closure_inplace":
                xb[...] = newx
            elif hold == "dict_rebind":
                cell["xb"] = newx
            elif hold == "tensor":
                XB_T.data[...] = newx
            v = np.random.default_rng(50 + k).standard_normal((2, 16))
            if hold == "arg":
                return fn(params, v, newx, yb)
            return fn(params, v)

        return {"fn": f, "call": call}

    return make


@pytest.mark.parametrize("hold", ["closure_inplace", "dict_rebind", "tensor", "arg"])
def test_guide_hvp_with_changing_data(hold):
    check(make_hvp(hold), n=42)


# ---------------------------------------------------------------------------------------------
# 3. The guide's object style: functional_call + compiled value_and_grad, the optimizer
#    stepping the model's own arrays outside; hyperparameters changed by hand between calls.
# ---------------------------------------------------------------------------------------------

def _opt(kind, params, lr=0.05):
    if kind == "sgd_mom":
        return tt.optim.SGD(params, lr=lr, momentum=0.9)
    if kind == "sgd_nesterov_wd":
        return tt.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True, weight_decay=1e-2)
    if kind == "adam":
        return tt.optim.Adam(params, lr=lr)
    if kind == "adam_amsgrad":
        return tt.optim.Adam(params, lr=lr, amsgrad=True, weight_decay=1e-3)
    if kind == "adamw":
        return tt.optim.AdamW(params, lr=lr)
    if kind == "rmsprop":
        return tt.optim.RMSprop(params, lr=lr * 0.1, momentum=0.5, centered=True)
    raise AssertionError(kind)


def make_object_style(kind, change):
    def make():
        model = nn.Sequential(nn.Linear(2, 16, rng=0), nn.Tanh(), nn.Linear(16, 1, rng=1))
        opt = _opt(kind, model.parameters())
        sched = tt.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        named = dict(model.named_parameters())
        params = {name: p.data for name, p in named.items()}
        mse = nn.MSELoss()

        def model_loss(params, x, y):
            return mse(nn.functional_call(model, params, x), y)

        def call(step, k):
            if change == "lr_by_hand":
                opt.param_groups[0]["lr"] = LRS[phase(k)]
            elif change == "to_f64" and k == 9:
                model.to(np.float64)
                for name, p in named.items():
                    params[name] = p.data
            elif change == "load_state" and k in (2, 9):
                sd = {kk: v * 0.5 for kk, v in model.state_dict().items()}
                model.load_state_dict(sd)
            r = np.random.default_rng(k)
            xb = r.standard_normal((8, 2))
            loss, grads = step(params, xb, np.sin(xb[:, :1]).astype(np.float32))
            for name, g in grads.items():
                named[name].grad = g
            opt.step()
            if change == "sched":
                sched.step()
            return loss

        return {"fn": tt.value_and_grad(model_loss), "call": call, "state": lambda: [model, opt]}

    return make


OPTS = ["sgd_mom", "sgd_nesterov_wd", "adam", "adam_amsgrad", "adamw", "rmsprop"]


@pytest.mark.parametrize("change", ["none", "lr_by_hand", "sched", "to_f64", "load_state"])
@pytest.mark.parametrize("kind", OPTS)
def test_object_style_functional_call(kind, change):
    check(make_object_style(kind, change), n=12)


# ---------------------------------------------------------------------------------------------
# 4. The guide's whole training step (zero_grad, loss, backward, clip, step, sched.step inside),
#    with every optimizer and scheduler, and the values it reads changing on calls 3/10/40.
# ---------------------------------------------------------------------------------------------

CLIP = 1.0


def _sched(kind, opt):
    S = tt.optim.lr_scheduler
    if kind == "step":
        return S.StepLR(opt, step_size=10, gamma=0.5)
    if kind == "exp":
        return S.ExponentialLR(opt, gamma=0.9)
    if kind == "cosine":
        return S.CosineAnnealingLR(opt, T_max=7)
    if kind == "linear":
        return S.LinearLR(opt, start_factor=0.25, total_iters=5)
    if kind == "multistep":
        return S.MultiStepLR(opt, milestones=[2, 9], gamma=0.3)
    if kind == "onecycle":
        return S.OneCycleLR(opt, max_lr=0.05, total_steps=50)
    if kind == "lambda":
        return S.LambdaLR(opt, lambda e: 1.0 / (1 + e))
    if kind == "sequential":
        return S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.5, total_iters=3),
                                    S.CosineAnnealingLR(opt, T_max=8)], milestones=[3])
    if kind == "chained":
        return S.ChainedScheduler([S.StepLR(opt, 4, 0.5), S.ExponentialLR(opt, 0.95)])
    return None


def make_train_step(opt_kind="adam", sched_kind="step", extra="none", n_layers="tanh"):
    def make():
        global CLIP
        CLIP = 1.0
        layers = [nn.Linear(4, 8, rng=0)]
        if extra in ("dropout", "dropout_eval10"):
            layers.append(nn.Dropout(0.3))
        if extra in ("batchnorm", "bn_eval10"):
            layers.append(nn.BatchNorm1d(8))
        layers += [nn.Tanh(), nn.Linear(8, 3, rng=1)]
        model = nn.Sequential(*layers)
        opt = _opt(opt_kind, model.parameters(), lr=0.01)
        sched = _sched(sched_kind, opt)
        loss_fn = nn.CrossEntropyLoss()
        cell = {"hook": None, "clip": 1.0}

        def train_step(x, y):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            if extra == "clip_value":
                nn.utils.clip_grad_value_(model.parameters(), 0.05)
            elif extra == "clip_attr":
                nn.utils.clip_grad_norm_(model.parameters(), cell["clip"])
            else:
                nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
            if sched is not None:
                sched.step()
            return loss

        def call(fn, k):
            global CLIP
            ph = phase(k)
            if extra == "clip_global":
                CLIP = [1.0, 0.01, 5.0, 0.1][ph]
            elif extra == "clip_attr":
                cell["clip"] = [1.0, 0.02, 3.0, 0.2][ph]
            elif extra in ("dropout_eval10", "bn_eval10"):
                model.train(ph % 2 == 0)
            elif extra == "label_smoothing":
                loss_fn.label_smoothing = [0.0, 0.1, 0.3, 0.0][ph]
            elif extra == "hook10" and k == 9:
                cell["hook"] = model[0].register_forward_hook(lambda m, a, o: o * 0.5)
            elif extra == "hook10" and k == 39:
                cell["hook"].remove()
            elif extra == "lr_outside":
                for g in opt.param_groups:
                    g["lr"] = [0.01, 0.03, 0.001, 0.02][ph]
            elif extra == "weight_data" and k in (2, 9, 39):
                model[0].weight.data = model[0].weight.data * -1.0
            r = np.random.default_rng(k)
            x = r.standard_normal((16, 4))
            y = r.integers(0, 3, 16)
            if extra == "ylist":
                y = y.tolist()
            elif extra == "yonehot":
                y = np.eye(3)[y]
            elif extra == "xtensor":
                x = tt.tensor(x.astype(np.float32))
            elif extra == "xlist":
                x = x.tolist()
            return fn(x, y)

        return {"fn": train_step, "call": call, "state": lambda: [model, opt, sched]}

    return make


SCHEDS = ["step", "exp", "cosine", "linear", "multistep", "onecycle", "lambda", "sequential",
          "chained", "none"]
STEP_XFAIL = {}


def _step_params():
    out = []
    for o in ["sgd_mom", "adam", "adamw", "rmsprop"]:
        for s in SCHEDS:
            cid = f"{o}-{s}"
            marks = [xf(STEP_XFAIL[cid])] if cid in STEP_XFAIL else []
            out.append(pytest.param(o, s, id=cid, marks=marks))
    return out


@pytest.mark.parametrize("opt_kind,sched_kind", _step_params())
def test_whole_step_optimizer_scheduler(opt_kind, sched_kind):
    long_run = opt_kind == "adam" and sched_kind in ("step", "onecycle", "sequential")
    check(make_train_step(opt_kind, sched_kind), n=42 if long_run else 12)


EXTRAS = ["clip_global", "clip_attr", "clip_value", "dropout", "dropout_eval10", "batchnorm",
          "bn_eval10", "label_smoothing", "hook10", "lr_outside", "weight_data", "ylist",
          "yonehot", "xtensor", "xlist"]
EXTRA_XFAIL = {}


@pytest.mark.parametrize("extra", [pytest.param(e, marks=[xf(EXTRA_XFAIL[e])] if e in EXTRA_XFAIL
                                                else []) for e in EXTRAS])
def test_whole_step_values_read(extra):
    long_run = extra in ("clip_global", "clip_attr", "dropout_eval10", "bn_eval10", "hook10",
                         "label_smoothing", "lr_outside", "weight_data")
    fn = check(make_train_step("sgd_mom", "onecycle", extra), n=42 if long_run else 12)
    if extra in ("yonehot", "xtensor", "dropout", "batchnorm", "clip_value"):
        assert len(fn.recompiles) == 1, fn.recompiles


def test_guide_train_step_one_program():
    """The guide: `assert len(train_step.recompiles) == 1` over every step."""
    fn = check(make_train_step("adam", "step"), n=42)
    assert len(fn.recompiles) == 1, fn.recompiles


# ---------------------------------------------------------------------------------------------
# 5. The transforms guide's examples, compiled, over calls with the inputs handed over in
#    every spelling (arrays, lists, floats, NumPy scalars, 0-d arrays, Tensors).
# ---------------------------------------------------------------------------------------------

W35 = np.random.default_rng(0).standard_normal((3, 4))
X53 = np.random.default_rng(1).standard_normal((5, 3))


def f_sin3(x):
    return tt.sum(tt.sin(x) * x ** 3)


def ex_logit_loss(p, x, y):
    return tt.softmax_cross_entropy(x @ p["W"] + p["b"], y)


def _tf_fns():
    one = lambda x: tt.tanh(x @ W35)  # noqa: E731
    ploss = lambda p, x, y: tt.cross_entropy(tt.softmax(tt.dot(x, p["W"]) + p["b"]), y)  # noqa: E731
    return {
        "grad": (tt.grad(f_sin3), "vec"),
        "value_and_grad": (tt.value_and_grad(f_sin3), "vec"),
        "vjp": (lambda x: tt.vjp(tt.sin, x)[1](np.ones(2)), "vec"),
        "jvp": (lambda x: tt.jvp(tt.sin, (x,), (np.array([1.0, 0.0]),)), "vec"),
        "jacobian": (tt.jacobian(tt.sin), "vec"),
        "jacobian_fwd": (tt.jacobian(tt.sin, mode="fwd"), "vec"),
        "hvp": (lambda x: tt.hvp(f_sin3, (x,), (np.array([1.0, 0.0]),)), "vec"),
        "hessian": (tt.hessian(f_sin3), "vec"),
        "grad_grad_sin": (tt.grad(tt.grad(tt.sin)), "scalar"),
        "grad_sin": (tt.grad(tt.sin), "scalar"),
        "value_and_grad_sin": (tt.value_and_grad(lambda t: tt.sin(t) * t), "scalar"),
        "hessian_scalar": (tt.hessian(lambda t: tt.sin(t) * t ** 2), "scalar"),
        "has_aux": (tt.grad(lambda x: (f_sin3(x), {"norm": tt.sum(x ** 2)}), has_aux=True), "vec"),
        "vg_has_aux": (tt.value_and_grad(lambda x: (f_sin3(x), x.sum()), has_aux=True), "vec"),
        "params_grad": (lambda W: tt.grad(ploss)({"W": W, "b": np.zeros(2)}, np.ones((4, 3)),
                                                  np.array([0, 1, 1, 0])), "mat32"),
        "argnums01": (lambda W: tt.grad(ploss, argnums=(0, 1))({"W": W, "b": np.zeros(2)},
                                                              np.ones((4, 3)) * W[0, 0],
                                                              np.array([0, 1, 1, 0])), "mat32"),
        "vmap_one": (tt.vmap(one), "batch"),
        "vmap_out1": (tt.vmap(one, out_axes=1), "batch"),
        "vmap_jac": (tt.vmap(tt.jacobian(one)), "batch"),
        "vmap_hessian": (tt.vmap(tt.hessian(lambda v: tt.sum(tt.sin(v) ** 2))), "batch"),
        "vmap_hvp": (tt.vmap(lambda v: tt.hvp(lambda u: tt.sum(u ** 3), (v,), (np.ones(3),))),
                     "batch"),
        "vmap_jvp": (tt.vmap(lambda v, t: tt.jvp(one, (v,), (t,))), "batch2"),
        "vmap_vjp": (tt.vmap(lambda v, c: tt.vjp(one, v)[1](c)[0]), "batchc"),
        "grad_of_vmap": (lambda w: tt.grad(lambda w: tt.sum(tt.vmap(
            lambda v: tt.sum(tt.tanh(v @ w)))(X53)))(w), "W"),
        "vmap_scaled": (lambda s: tt.vmap(lambda p, x: p["s"] * tt.tanh(x @ p["W"]),
                                          in_axes=({"W": None, "s": 0}, 0))(
            {"W": W35, "s": s}, X53), "s5"),
        "outer": (lambda a: tt.vmap(tt.vmap(lambda s, t: s * t, (None, 0)), (0, None))(
            a, np.arange(4.0)), "a3"),
    }


def _tf_input(kind, spell, k):
    r = np.random.default_rng(k)
    if kind == "vec":
        v = r.standard_normal(2)
    elif kind == "scalar":
        v = np.array(r.standard_normal())
    elif kind == "mat32":
        v = r.standard_normal((3, 2))
    elif kind in ("batch", "batch2", "batchc"):
        v = r.standard_normal((5, 3))
    elif kind == "W":
        v = r.standard_normal((3, 4))
    elif kind == "s5":
        v = r.standard_normal(5)
    else:
        v = r.standard_normal(3)
    if spell == "list":
        v = v.tolist()
    elif spell == "tensor":
        v = tt.tensor(v)
    elif spell == "f32":
        v = v.astype(np.float32) if v.ndim else np.float32(v)
    elif spell == "npscalar":
        v = np.float64(v) if v.ndim == 0 else v
    elif spell == "float":
        v = float(v) if v.ndim == 0 else v
    args = (v,)
    if kind == "batch2":
        args = (v, np.asarray(v) * 0.5)
    elif kind == "batchc":
        args = (v, np.ones((5, 4)) * (k + 1))
    return args


def make_transform(name, spell):
    def make():
        f, kind = _tf_fns()[name]

        def call(fn, k):
            return fn(*_tf_input(kind, spell, k))

        return {"fn": f, "call": call}

    return make


HESS1 = "hessian of a function of one value: 0-d array eagerly, NumPy scalar compiled"
TF_XFAIL = {f"hessian_scalar-{sp}": HESS1 for sp in ["array", "tensor", "list", "float", "npscalar",
                                                      "f32"]}
TF_XFAIL = {}    # fixed since: a result that is a 0-d array eagerly is one compiled too


def _tf_params():
    out = []
    for name, (_, kind) in _tf_fns().items():
        spells = ["array", "tensor"] + (["list"] if kind == "scalar" else []) + (
            ["float", "npscalar", "f32"] if kind == "scalar" else ["f32"])
        for sp in spells:
            cid = f"{name}-{sp}"
            marks = [xf(TF_XFAIL[cid])] if cid in TF_XFAIL else []
            out.append(pytest.param(name, sp, id=cid, marks=marks))
    return out


@pytest.mark.parametrize("name,spell", _tf_params())
def test_transforms_guide_compiled(name, spell):
    check(make_transform(name, spell), n=12)


# ---------------------------------------------------------------------------------------------
# 6. The tape guide and "Coming from PyTorch": backward with a cotangent, accumulation across
#    calls, in-place methods, a manual SGD step under no_grad, PyTorch's pairs and estimators.
# ---------------------------------------------------------------------------------------------

def make_tape_pt(name):
    def make():
        x = tt.tensor([0.5, 2.0], requires_grad=True, name="x")
        w = tt.tensor([1.0, 2.0], requires_grad=True)
        cell = {"scale": 1.0}

        if name == "backward_cotangent":
            def f(c):
                y = tt.tanh(x) * x
                y.backward(c)
                return y
        elif name == "backward_accumulate_no_zero":
            def f(c):
                y = (tt.tanh(x) * x * c).sum()
                y.backward()
                return y.detach()
        elif name == "jvp_method":
            def f(t):
                y = tt.tanh(x) * x
                return y.jvp({x: t})
        elif name == "no_grad_inside":
            def f(t):
                with tt.no_grad():
                    z = x * t
                return z
        elif name == "inplace_chain":
            def f(c):
                h = w * c
                h.mul_(w).add_(1)
                h.sum().backward()
                return h.detach()
        elif name == "manual_sgd_sub_":
            def f(c):
                loss = ((w * c - 1) ** 2).sum()
                loss.backward()
                with tt.no_grad():
                    w.sub_(0.1 * tt.tensor(w.grad))
                w.grad = None
                return loss.detach()
        elif name == "manual_sgd_data":
            def f(c):
                loss = ((w * c - 1) ** 2).sum()
                loss.backward()
                w.data -= cell["scale"] * 0.1 * w.grad
                w.grad = None
                return loss.detach()
        elif name == "max_dim_pair":
            def f(a):
                return tt.tensor(a).max(dim=1)
        elif name == "max_dim_pair_grad":
            def f(a):
                def g(t):
                    v, i = t.max(dim=1)
                    return v.sum() + i.sum() * 0.0
                return tt.tensor(a).max(dim=1).indices, tt.value_and_grad(g)(a)
        elif name == "topk":
            def f(a):
                return tt.tensor(a).topk(2, dim=-1)
        elif name == "std_dim":
            def f(a):
                t = tt.tensor(a)
                return t.std(dim=1), t.std(axis=1), t.var(-1, correction=1)
        elif name == "std_ambiguous":
            def f(a):
                return tt.tensor(a).std(1)
        elif name == "pads":
            def f(a):
                return tt.value_and_grad(lambda t: (F.pad(t, (1, 2)) ** 2).sum()
                                         + tt.pad(t, ((1, 2), (0, 0))).sum() * 2)(a)
        elif name == "split_chunk":
            def f(a):
                t = tt.tensor(a)
                return t.split(2, dim=1), t.chunk(3, dim=1), tt.cat([t, t], dim=1)
        elif name == "scatter_add":
            def f(a):
                idx = np.array([[0, 1, 0], [2, 2, 1], [1, 0, 0], [3, 3, 3]])
                return tt.value_and_grad(lambda t: (t.scatter_add(1, idx, t[:, :3] * 2) ** 2
                                                    ).sum())(a)
        elif name == "masked_fill":
            def f(a):
                t = tt.tensor(a)
                return t.masked_fill(t > 0.3, float("-inf")).softmax(-1) if hasattr(
                    t, "softmax") else tt.softmax(t.masked_fill(t > 0.3, float("-inf")), axis=-1)
        else:
            raise AssertionError(name)

        def call(fn, k):
            r = np.random.default_rng(k)
            if name in ("backward_cotangent",):
                return fn(r.standard_normal(2))
            if name in ("backward_accumulate_no_zero", "no_grad_inside", "inplace_chain",
                        "manual_sgd_sub_", "manual_sgd_data"):
                cell["scale"] = [1.0, 0.5, 2.0, 0.25][phase(k)]
                return fn([1.0, 3.0, 0.5, 2.0][phase(k)])
            if name == "jvp_method":
                return fn(r.standard_normal(2))
            return fn(r.standard_normal((4, 5)))

        return {"fn": f, "call": call, "state": lambda: [x, w]}

    return make


TAPE_CASES = ["backward_cotangent", "backward_accumulate_no_zero", "jvp_method", "no_grad_inside",
              "inplace_chain", "manual_sgd_sub_", "manual_sgd_data", "max_dim_pair",
              "max_dim_pair_grad", "topk", "std_dim", "std_ambiguous", "pads", "split_chunk",
              "scatter_add", "masked_fill"]
TAPE_XFAIL = {}


@pytest.mark.parametrize("name", [pytest.param(c, marks=[xf(TAPE_XFAIL[c])] if c in TAPE_XFAIL
                                               else []) for c in TAPE_CASES])
def test_tape_and_pytorch_guides(name):
    check(make_tape_pt(name), n=42 if name.startswith(("manual", "backward_acc")) else 12)


def test_std_ambiguous_warning_once_per_line():
    """pytorch.md: `t.std(1)` warns (UserWarning, once per line); compiled, the same count."""
    counts = []
    for compiled in (False, True):
        def f(a):
            return tt.tensor(a).std(1)
        fn = tt.compile(f) if compiled else f
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            for k in range(5):
                fn(np.random.default_rng(k).standard_normal((3, 4)))
        counts.append(sum("std" in str(c.message) or "unbiased" in str(c.message)
                          for c in caught))
    assert counts[0] == counts[1], counts


# ---------------------------------------------------------------------------------------------
# 7. The training guide's and the examples' code, compiled as a user adapts it.
# ---------------------------------------------------------------------------------------------

PENALTY = "frobenius"
SD_HELD = {}


def _tiny_gpt(dropout=0.1):
    class Attn(nn.Module):
        def __init__(self, n_embd, n_head, dropout):
            super().__init__()
            self.n_head, self.dropout = n_head, dropout
            self.c_attn = nn.Linear(n_embd, 3 * n_embd, rng=3)
            self.c_proj = nn.Linear(n_embd, n_embd, rng=4)
            self.resid_dropout = nn.Dropout(dropout)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                       for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.dropout if self.training else 0.0)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(11, 8, rng=1), nn.Embedding(6, 8, rng=2)
            self.drop = nn.Dropout(dropout)
            self.ln_1 = nn.LayerNorm(8)
            self.attn = Attn(8, 2, dropout)
            self.ln_f = nn.LayerNorm(8)
            self.lm_head = nn.Linear(8, 11, bias=False, rng=5)
            self.wte.weight = self.lm_head.weight

        def forward(self, idx, targets=None):
            T = idx.shape[1]
            x = self.drop(self.wte(idx) + self.wpe(np.arange(T)))
            x = x + self.attn(self.ln_1(x))
            logits = self.lm_head(self.ln_f(x))
            if targets is None:
                return logits
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    return GPT()


def make_doc(name):  # noqa: C901 - one case per documented example
    def make():
        global PENALTY
        PENALTY = "frobenius"
        SD_HELD.clear()
        rng = np.random.default_rng(0)
        state = []
        st = {}

        if name in ("bce_pos_weight_inplace", "bce_pos_weight_rebind"):
            pw = np.array(2.0)
            lossm = nn.BCEWithLogitsLoss(pos_weight=pw)
            st["pw"] = pw

            def f(x, y):
                return tt.value_and_grad(lambda x: lossm(x, y))(x)

            def call(fn, k):
                v = [2.0, 0.5, 3.0, 1.0][phase(k)]
                if name.endswith("inplace"):
                    st["pw"][...] = v
                else:
                    lossm.pos_weight = np.array(v)
                r = np.random.default_rng(k)
                x = np.array([-1e4, -40.0, 0.0, 40.0, 1e4]) * r.uniform(0.5, 1.5)
                return fn(x, (r.uniform(size=5) > 0.5).astype(float))
        elif name in ("ce_weight_inplace", "ce_ignore_attr", "ce_smoothing_attr"):
            wt = np.array([1.0, 2.0, 0.5])
            ce = nn.CrossEntropyLoss(weight=wt, ignore_index=-1, label_smoothing=0.1)

            def f(z, y):
                return tt.value_and_grad(lambda z: ce(z, y))(z)

            def call(fn, k):
                ph = phase(k)
                if name == "ce_weight_inplace":
                    wt[...] = [[1.0, 2.0, 0.5], [3.0, 1.0, 1.0], [0.1, 0.2, 5.0], [1, 1, 1]][ph]
                elif name == "ce_ignore_attr":
                    ce.ignore_index = [-1, 2, 0, -100][ph]
                else:
                    ce.label_smoothing = [0.1, 0.0, 0.4, 0.05][ph]
                r = np.random.default_rng(k)
                return fn(r.standard_normal((6, 3)), np.array([0, 2, -1, 1, 2, 0]))
        elif name == "adamw_groups_cosine_clip":
            w = tt.tensor(np.ones(3), requires_grad=True)
            b = tt.tensor(np.zeros(1), requires_grad=True)
            opt = tt.optim.AdamW([{"params": [w]}, {"params": [b], "weight_decay": 0.0}], lr=0.1)
            sched = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
            state = [w, b, opt, sched]

            def f(c):
                loss = ((w * c + b - 1) ** 2).sum()
                opt.zero_grad()
                loss.backward()
                tt.nn.utils.clip_grad_norm_([w, b], max_norm=1.0)
                opt.step()
                sched.step()
                return loss

            def call(fn, k):
                return fn([2.0, 1.5, 3.0, 0.5][phase(k)])
        elif name in ("cnn_bn_dropout_step", "cnn_eval_predict"):
            cnn = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, rng=0), nn.BatchNorm2d(4), nn.ReLU(),
                                nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.25, rng=1),
                                nn.Linear(4 * 4 * 4, 10, rng=2))
            opt = tt.optim.Adam(cnn.parameters(), lr=0.01)
            state = [cnn, opt]
            st["sd"] = lambda: canon(cnn.state_dict())

            if name == "cnn_bn_dropout_step":
                def f(x, y):
                    opt.zero_grad()
                    loss = nn.CrossEntropyLoss()(cnn(x), y)
                    loss.backward()
                    norm = nn.utils.clip_grad_norm_(cnn.parameters(), max_norm=1.0)
                    opt.step()
                    return loss, norm
            else:
                def f(x):
                    with tt.no_grad():
                        return cnn(x).numpy().argmax(axis=1), cnn(x)

            def call(fn, k):
                cnn.train(phase(k) != 2)
                r = np.random.default_rng(k)
                x = r.uniform(size=(5, 1, 8, 8))
                if name == "cnn_eval_predict":
                    return fn(x)
                return fn(x, np.array([0, 1, 2, 3, 4]))
        elif name in ("load_state_inplace", "load_state_rebind"):
            model = nn.Sequential(nn.Linear(4, 8, rng=0), nn.BatchNorm1d(8), nn.Linear(8, 2, rng=1))
            SD_HELD["sd"] = {kk: v.copy() for kk, v in model.state_dict().items()}
            state = [model]

            def f(x):
                model.load_state_dict(SD_HELD["sd"])
                return model(x)

            def call(fn, k):
                if k in (2, 9, 39):
                    if name == "load_state_inplace":
                        for v in SD_HELD["sd"].values():
                            v *= 0.5 if v.dtype.kind == "f" else 1
                    else:
                        SD_HELD["sd"] = {kk: (v * 2).astype(v.dtype)
                                         for kk, v in SD_HELD["sd"].items()}
                return fn(np.random.default_rng(k).standard_normal((6, 4)))
        elif name.startswith("functional_call_"):
            model = nn.Sequential(nn.Linear(4, 8, rng=0, dtype=np.float64), nn.Tanh(),
                                  nn.Linear(8, 3, rng=1, dtype=np.float64))
            x, y = rng.standard_normal((16, 4)), np.arange(16) % 3
            params = {n_: p.data for n_, p in model.named_parameters()}

            def loss(p):
                return nn.CrossEntropyLoss()(nn.functional_call(model, p, x), y)

            kind = name.split("_")[-1]
            if kind == "grad":
                f = tt.grad(loss)
            elif kind == "hvp":
                def f(p):
                    return tt.hvp(loss, (p,), ({kk: np.ones_like(v) for kk, v in p.items()},))
            else:
                def f(p):
                    return tt.jacobian(lambda p: nn.functional_call(model, p, x[:2]))(p)

            def call(fn, k):
                ph = phase(k)
                x[...] = np.random.default_rng(ph).standard_normal((16, 4))
                y[...] = (np.arange(16) + ph) % 3
                out = fn(params)
                for kk in params:
                    params[kk] -= 0.01 * np.random.default_rng(k).standard_normal(params[kk].shape)
                return out
        elif name in ("predict_guard_no_grad", "predict_guard_grad"):
            model = nn.Linear(3, 1, rng=0)
            state = [model]

            def f(x):
                yv = model(x)
                return yv * 2 if float(tt.sum(yv)) > 0 else -yv

            def call(fn, k):
                if k in (2, 9, 39):
                    model.weight.data = -model.weight.data
                x = np.random.default_rng(k).standard_normal((4, 3))
                if name.endswith("no_grad"):
                    with tt.no_grad():
                        return fn(x)
                out = fn(x)
                out.sum().backward()
                return out
        elif name == "taped_step_backward_outside":
            net = nn.Sequential(nn.Linear(3, 8, rng=0), nn.Tanh(), nn.Linear(8, 1, rng=1))
            opt = tt.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
            state = [net, opt]

            def f(x):
                return (net(x) ** 2).mean()

            def call(fn, k):
                loss = fn(np.random.default_rng(k).standard_normal((16, 3)).astype(np.float32))
                opt.zero_grad()
                loss.backward()
                opt.step()
                return loss
        elif name.startswith("gp_nlp"):
            xs = np.linspace(-2, 2, 7)
            ys = np.sin(xs) + 0.1 * rng.standard_normal(7)

            def kernel(a, b_, log_ell, log_sf):
                d2 = (a[:, None] - b_[None, :]) ** 2
                return np.exp(2 * log_sf) * np.exp(-0.5 * d2 * np.exp(-2 * log_ell))

            def nlp(theta):
                log_ell, log_sf, log_sn = theta[0], theta[1], theta[2]
                cov = kernel(xs, xs, log_ell, log_sf) + (np.exp(2 * log_sn) + 1e-8) * np.eye(7)
                ll = stats.multivariate_normal.logpdf(ys, mean=np.zeros(7), cov=cov)
                lp = tt.sum(stats.norm.logpdf(theta, 0.0, 2.0))
                return -(ll + lp)

            f = tt.value_and_grad(nlp)
            spell = name.split("-")[-1]

            def call(fn, k):
                th = np.random.default_rng(k).uniform(-0.5, 0.5, 3)
                if spell == "list":
                    return fn(th.tolist())
                if spell == "tensor":
                    return fn(tt.tensor(th))
                return fn(th)
        elif name.startswith("dp_sgd"):
            sizes = [6, 5, 3]
            p0 = {}
            for i, (m, n_) in enumerate(zip(sizes, sizes[1:])):
                p0[f"W{i}"] = rng.uniform(-1, 1, (m, n_)) / np.sqrt(m)
                p0[f"b{i}"] = np.zeros(n_)
            st["p"] = p0

            def logits(p, x):
                n_ = len(p) // 2
                h = x
                for i in range(n_):
                    h = h @ p[f"W{i}"] + p[f"b{i}"]
                    if i < n_ - 1:
                        h = tt.tanh(h)
                return h

            def loss(p, x, y):
                return tt.softmax_cross_entropy(logits(p, x), y)

            peg = tt.vmap(tt.grad(loss), in_axes=(None, 0, 0))

            def f(params, xb, yb, clip, noise, z):
                g = peg(params, xb, yb)
                B = len(xb)
                norms = np.sqrt(sum(np.sum(v.reshape(B, -1) ** 2, axis=1) for v in g.values()))
                scale = 1.0 / np.maximum(1.0, norms / clip)
                out = {}
                for nm, v in g.items():
                    total = np.tensordot(scale, v, axes=1)
                    out[nm] = (total + noise * clip * z[nm]) / B
                return out

            def call(fn, k):
                r = np.random.default_rng(k)
                xb, yb = r.standard_normal((8, 6)), r.integers(0, 3, 8)
                z = {nm: r.standard_normal(v.shape) for nm, v in st["p"].items()}
                clip = [1.0, 0.1, 1e9, 0.5][phase(k)]
                noise = [1.0, 0.0, 2.0, 0.5][phase(k)]
                if name.endswith("np"):
                    clip, noise = np.float64(clip), np.float64(noise)
                g = fn(st["p"], xb, yb, clip, noise, z)
                st["p"] = {nm: st["p"][nm] - 0.1 * g[nm] for nm in st["p"]}
                return g
        elif name.startswith("newton_hvp"):
            x, y = rng.standard_normal((12, 5)), rng.integers(0, 3, 12)
            lam = 1e-2

            def f(W, v):
                def loss(W):
                    data = tt.crossEntropy(tt.softmax(tt.dot(x, W)), y)
                    return data + lam * (tt.sum(W * W) if PENALTY == "squared"
                                         else tt.frobeniusNorm(W))
                return tt.hvp(loss, (W,), (v.reshape(W.shape),))

            def call(fn, k):
                global PENALTY
                PENALTY = ["frobenius", "squared", "frobenius", "squared"][phase(k)]
                r = np.random.default_rng(k)
                return fn(r.standard_normal((5, 3)), r.standard_normal(15))
        elif name.startswith("gpt_"):
            model = _tiny_gpt(0.1 if "dropout" in name else 0.0)
            opt = tt.optim.AdamW(model.parameters(), lr=1e-2)
            named = dict(model.named_parameters())
            params = {n_: p.data for n_, p in named.items()}
            state = [model, opt]

            def loss_of(params, x, y):
                return nn.functional_call(model, params, x, y)[1]

            f = tt.value_and_grad(loss_of)

            def call(fn, k):
                for g in opt.param_groups:
                    g["lr"] = 1e-2 * min(1.0, (k + 1) / 5) * (0.5 if k >= 9 else 1.0)
                if "evaltoggle" in name:
                    model.train(phase(k) % 2 == 0)
                r = np.random.default_rng(k)
                data = r.integers(0, 11, (3, 6))
                x, y = data[:, :5], data[:, 1:]
                loss, grads = fn(params, x, y)
                for nm, g in grads.items():
                    named[nm].grad = g
                opt.step()
                return loss
        elif name.startswith("generate"):
            model = _tiny_gpt(0.0)
            model.eval()
            state = [model]

            def f(idx, temperature):
                logits = model(idx)[:, -1, :] / temperature
                probs = F.softmax(logits, dim=-1)
                return tt.multinomial(probs, 1)

            def call(fn, k):
                temp = [1.0, 0.5, 2.0, 0.8][phase(k)]
                if name.endswith("np32"):
                    temp = np.float32(temp)
                idx = np.random.default_rng(k).integers(0, 11, (2, 5))
                with tt.no_grad():
                    return fn(idx, temp)
        elif name == "train_mlp_logits_closure":
            model = nn.Sequential(nn.Linear(6, 8, rng=0), nn.ReLU(), nn.Linear(8, 4, rng=1))
            opt = tt.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-3)
            named = dict(model.named_parameters())
            params = {n_: p.data for n_, p in named.items()}
            loss_fn = nn.CrossEntropyLoss()
            state = [model, opt]

            def f(params, xb, yb):
                logits = []

                def loss_of(p):
                    logits.append(tt.nn.functional_call(model, p, xb))
                    return loss_fn(logits[0], yb)

                loss, grads = tt.value_and_grad(loss_of)(params)
                return loss, grads, logits[0]

            def call(fn, k):
                r = np.random.default_rng(k)
                loss, grads, logits = fn(params, r.standard_normal((8, 6)).astype(np.float32),
                                         r.integers(0, 4, 8))
                for nm, g in grads.items():
                    named[nm].grad = g
                opt.step()
                return loss, logits
        elif name == "binary_plateau":
            model = nn.Sequential(nn.Linear(5, 6, rng=0), nn.GELU(), nn.Dropout(0.2),
                                  nn.Linear(6, 1, rng=1))
            opt = tt.optim.Adam(model.parameters(), lr=1e-2)
            sched = tt.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
            lf = nn.BCEWithLogitsLoss()
            state = [model, opt, sched]

            def f(x, y):
                opt.zero_grad()
                loss = lf(model(x).reshape(-1), y)
                loss.backward()
                opt.step()
                return loss

            def call(fn, k):
                r = np.random.default_rng(k)
                loss = fn(r.standard_normal((8, 5)), (r.uniform(size=8) > 0.5).astype(float))
                sched.step(float(loss) * (1 + (k % 3 == 0)))
                return loss
        elif name.startswith("logreg_example"):
            W = tt.tensor(np.zeros((5, 3)), requires_grad=True, name="W")
            opt = tt.optim.SGD([W], lr=0.1, momentum=0.9)
            lam = tt.tensor(1e-3, name="lam")
            state = [W, opt, lam]

            def f(xb, yb):
                x, y = tt.tensor(xb, name="x"), tt.tensor(yb, name="y")
                loss = tt.crossEntropy(tt.softmax(tt.dot(x, W)), y) + lam * tt.frobeniusNorm(W)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if name.endswith("wengert"):
                    return loss, tt.wengert_list(loss)
                return loss

            def call(fn, k):
                if k in (2, 9, 39):
                    lam.data = np.array([1e-3, 0.1, 0.0, 1.0][phase(k)])
                r = np.random.default_rng(k)
                return fn(r.standard_normal((8, 5)), np.eye(3)[r.integers(0, 3, 8)])
        elif name == "unet_block_step":
            class ConvBlock(nn.Module):
                def __init__(self, cin, cout, stride=1):
                    super().__init__()
                    self.conv = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, rng=0,
                                          dtype=np.float64)
                    self.norm = nn.GroupNorm(2, cout, dtype=np.float64)
                    self.act = nn.SiLU()

                def forward(self, x):
                    return self.act(self.norm(self.conv(x)))

            class Tiny(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc1 = ConvBlock(1, 4)
                    self.enc2 = ConvBlock(4, 4, stride=2)
                    self.up1 = nn.ConvTranspose2d(4, 4, 2, stride=2, rng=1, dtype=np.float64)
                    self.dec1 = ConvBlock(8, 4)
                    self.head = nn.Conv2d(4, 1, 1, rng=2, dtype=np.float64)

                def forward(self, x):
                    e1 = self.enc1(x)
                    e2 = self.enc2(e1)
                    e2 = F.interpolate(F.interpolate(e2, scale_factor=2, mode="bilinear",
                                                     align_corners=False), size=(2, 2))
                    d1 = self.dec1(tt.cat([self.up1(e2), e1], dim=1))
                    return x - self.head(d1)

            model = Tiny()
            opt = tt.optim.AdamW(model.parameters(), lr=3e-3)
            sched = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=12)
            state = [model, opt, sched]

            def f(noisy_x, clean):
                opt.zero_grad()
                loss = F.mse_loss(model(noisy_x), clean)
                loss.backward()
                opt.step()
                sched.step()
                return loss

            def call(fn, k):
                r = np.random.default_rng(k)
                clean = r.uniform(size=(2, 1, 4, 4))
                sigma = r.uniform(0.1, 0.3, 2).reshape(-1, 1, 1, 1)
                return fn(clean + sigma * r.standard_normal(clean.shape), clean)
        elif name == "minibatches_seed_arg":
            X = rng.standard_normal((10, 3))
            Y = rng.integers(0, 2, 10)
            Wt = tt.tensor(rng.standard_normal((3, 2)))

            def f(seed):
                tot = 0.0
                for xb, yb in tt.data.minibatches(X, Y, batch_size=4, rng=seed):
                    tot = tot + tt.softmax_cross_entropy(tt.tensor(xb) @ Wt, yb)
                return tot

            def call(fn, k):
                return fn(phase(k))
        elif name.startswith("leak_"):
            def f(x):
                kept = []

                def inner(t):
                    kept.append(tt.tanh(t) * 2)
                    return tt.sum(kept[0] ** 2)

                g = tt.grad(inner)(x) if name == "leak_grad" else tt.value_and_grad(inner)(x)
                return g, kept[0]

            def call(fn, k):
                return fn(np.random.default_rng(k).standard_normal(4))
        elif name == "dropout_rng_state_dict":
            d = nn.Dropout(0.5, rng=7)
            state = [d]

            def f(x):
                return d(x) * 2

            def call(fn, k):
                out = fn(np.ones((3, 4)) * (k + 1))
                return out, canon(d.state_dict())
        else:
            raise AssertionError(name)

        def state_fn():
            extra = [st["sd"]()] if "sd" in st else []
            return list(state) + extra

        return {"fn": f, "call": call, "state": state_fn}

    return make


DOC_CASES = ["bce_pos_weight_inplace", "bce_pos_weight_rebind", "ce_weight_inplace",
             "ce_ignore_attr", "ce_smoothing_attr", "adamw_groups_cosine_clip",
             "cnn_bn_dropout_step", "cnn_eval_predict", "load_state_inplace", "load_state_rebind",
             "functional_call_grad", "functional_call_hvp", "functional_call_jacobian",
             "predict_guard_no_grad", "predict_guard_grad", "taped_step_backward_outside",
             "gp_nlp-array", "gp_nlp-list", "gp_nlp-tensor", "dp_sgd-float", "dp_sgd-np",
             "newton_hvp", "gpt_step", "gpt_dropout_step", "gpt_dropout_evaltoggle",
             "generate-float", "generate-np32", "train_mlp_logits_closure", "binary_plateau",
             "logreg_example", "logreg_example_wengert", "unet_block_step", "minibatches_seed_arg",
             "dropout_rng_state_dict", "leak_grad", "leak_value_and_grad"]
DOC_LONG = {"adamw_groups_cosine_clip", "load_state_inplace", "load_state_rebind",
            "predict_guard_no_grad", "predict_guard_grad", "logreg_example", "newton_hvp"}
LEAK = "an intermediate kept from inside a transform: Tensor eagerly, ndarray compiled"
DOC_XFAIL = {"train_mlp_logits_closure": LEAK, "leak_grad": LEAK, "leak_value_and_grad": LEAK}
DOC_XFAIL = {}   # fixed since: a Tensor kept from inside a transform is a Tensor that requires grad


@pytest.mark.parametrize("name", [pytest.param(c, marks=[xf(DOC_XFAIL[c])] if c in DOC_XFAIL
                                               else []) for c in DOC_CASES])
def test_documented_examples_compiled(name):
    check(make_doc(name), n=42 if name in DOC_LONG else 12)
