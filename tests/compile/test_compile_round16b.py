"""Round 16b: long training programs, compiled wholly or partly, against eager, bit for bit.

Written by a fresh user who read only README.md, docs/guides/compile.md, docs/guides/training.md
and `help(tt.compile)`. Each case is built twice from the same seeds: once with `tt.compile`
applied where the case says, once with the identity. Both sides run the same number of calls;
after EVERY call the results (type, dtype, requires_grad, value), every parameter and its
`.grad`, buffers, optimizer and scheduler state, generator state and the Python state the case
exposes are compared bit for bit. Changes are made outside the compiled functions, on the 3rd,
10th and 40th call (and where a case needs).

Outcome per case: equal; refused (a RuntimeError from tt.compile that names a fix); warn (a
compile warning, then a difference); silent (a difference without a warning); crash (another
exception than eager's). Cases that are not equal or refused are marked xfail(strict=True).
"""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

LR = tt.optim.lr_scheduler


# ----------------------------------------------------------------------------- the harness

def canon(x, depth=0):
    """A comparable, bit-exact picture of x."""
    if depth > 12:
        return ("deep",)
    if isinstance(x, tt.Tensor):
        return ("T", type(x).__name__, x.data.dtype.str, x.data.shape, bool(x.requires_grad),
                np.ascontiguousarray(x.data).tobytes())
    if isinstance(x, np.ndarray):
        return ("A", x.dtype.str, x.shape, np.ascontiguousarray(x).tobytes())
    if isinstance(x, np.generic):
        return ("S", type(x).__name__, x.tobytes())
    if isinstance(x, (bool, int, str, type(None))):
        return (type(x).__name__, x)
    if isinstance(x, float):
        return ("f", float(x).hex())
    if isinstance(x, dict):
        return ("D", type(x).__name__, [(canon(k, depth + 1), canon(v, depth + 1)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return ("L", type(x).__name__, [canon(v, depth + 1) for v in x])
    if isinstance(x, np.random.Generator):
        return ("G", canon(x.bit_generator.state, depth + 1))
    if isinstance(x, nn.Module):
        return model_state(x)
    if isinstance(x, tt.optim.Optimizer):
        return opt_state(x)
    if isinstance(x, LR.LRScheduler) or isinstance(x, LR.ReduceLROnPlateau):
        return sched_state(x)
    if callable(x):
        return ("fn", getattr(x, "__qualname__", type(x).__name__))
    return ("obj", type(x).__name__)


def model_state(m):
    out = [("training", [mm.training for mm in m.modules()])]
    for name, p in m.named_parameters():
        out.append((name, canon(p), canon(p.grad)))
    for name, b in m.named_buffers():
        out.append((name, canon(b)))
    return ("M", out)


def opt_state(o):
    out = []
    for g in o.param_groups:
        out.append([(k, canon(v)) for k, v in g.items() if k != "params"])
        out.append([canon(p) for p in g["params"]])
    for g in o.param_groups:
        for p in g["params"]:
            st = o.state.get(p, {}) if hasattr(o.state, "get") else {}
            out.append(canon(dict(st)))
    return ("O", out)


def sched_state(s):
    sd = {k: v for k, v in s.state_dict().items() if k not in ("optimizer",)}
    last = s.get_last_lr() if hasattr(s, "get_last_lr") else None
    return ("Sch", canon(sd), canon(last))


def snap(*objs):
    return [canon(o) for o in objs] + [canon(tt.get_rng_state())]


def identity_compile(f=None, **kw):
    if f is None:
        return lambda g: g
    return f


def run_side(build, n, compiled):
    tt.manual_seed(1234)
    C = tt.compile if compiled else identity_compile
    s = build(C)
    rows = []
    warned = []
    for i in range(n):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                r = s["step"](i)
                row = ("ok", canon(r), s["snap"]())
            except Exception as e:  # noqa: BLE001 - the outcome is classified below
                row = ("err", type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
        warned.extend(str(x.message).splitlines()[0][:200] for x in w
                      if "compile" in str(x.message).lower())
        rows.append((row, list(warned)))
        if row[0] == "err":
            break
    return rows, s


def outcome(build, n=12):
    eager, _ = run_side(build, n, False)
    comp, s = run_side(build, n, True)
    for i, ((er, _), (cr, cw)) in enumerate(zip(eager, comp)):
        if er == cr:
            if er[0] == "err":
                return "equal", f"both raised {er[1]} at call {i}"
            continue
        if cr[0] == "err" and er[0] == "ok":
            if cr[1] == "RuntimeError" and "tt.compile" in cr[2]:
                return "refused", f"call {i}: {cr[2]}"
            return "crash", f"call {i}: compiled raised {cr[1]}: {cr[2]}"
        if cr[0] == "err" and er[0] == "err":
            if cr[1] == er[1]:
                return "equal", f"both raised {er[1]} at call {i}"
            return "crash", f"call {i}: eager {er[1]}, compiled {cr[1]}: {cr[2]}"
        if er[0] == "err":
            return "silent", f"call {i}: eager raised {er[1]}: {er[2]}; compiled returned"
        what = "result" if er[1] != cr[1] else "state"
        if what == "state":
            for k, (a, b) in enumerate(zip(er[2], cr[2])):
                if a != b:
                    what = f"state[{k}]"
                    break
        after = f" after warning {cw[0]!r}" if cw else ""
        return ("warn" if cw else "silent"), f"call {i}: {what} differs{after}"
    if len(eager) != len(comp):
        return "silent", "different number of calls"
    return "equal", ""


CASES = {}


def case(n=12, expect="equal", reason=""):
    def deco(build):
        CASES[build.__name__] = (build, n, expect, reason)
        return build
    return deco


# ----------------------------------------------------------------------------- helpers

def mlp(seed=0, d_in=4, h=8, d_out=3, dtype=np.float32, act=None):
    return nn.Sequential(nn.Linear(d_in, h, rng=seed, dtype=dtype), act or nn.Tanh(),
                         nn.Linear(h, d_out, rng=seed + 1, dtype=dtype))


class Net(nn.Module):
    """fc1 -> act -> fc2, with the activation an attribute that can be replaced."""

    def __init__(self, seed=0, d_in=4, h=8, d_out=3, act=None):
        self.fc1 = nn.Linear(d_in, h, rng=seed)
        self.act = act or nn.Tanh()
        self.fc2 = nn.Linear(h, d_out, rng=seed + 1)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def batch(rng, n=16, d=4, c=3):
    return rng.standard_normal((n, d)), rng.integers(0, c, n)


# ----------------------------------------------------------------------------- family A:
# whole steps for every optimizer x schedule, with hand changes on calls 3, 10, 40

OPTS = {
    "sgd": lambda p: tt.optim.SGD(p, lr=0.1),
    "sgd_mom": lambda p: tt.optim.SGD(p, lr=0.05, momentum=0.9),
    "sgd_nesterov_wd": lambda p: tt.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "sgd_dampening": lambda p: tt.optim.SGD(p, lr=0.05, momentum=0.8, dampening=0.3),
    "adam": lambda p: tt.optim.Adam(p, lr=0.01),
    "adam_amsgrad_wd": lambda p: tt.optim.Adam(p, lr=0.01, amsgrad=True, weight_decay=1e-2),
    "adamw": lambda p: tt.optim.AdamW(p, lr=0.01),
    "rmsprop": lambda p: tt.optim.RMSprop(p, lr=0.01),
    "rmsprop_centered_mom": lambda p: tt.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True,
                                                       weight_decay=1e-3),
}

SCHEDS = {
    "none": lambda o: None,
    "step": lambda o: LR.StepLR(o, step_size=3, gamma=0.5),
    "cosine": lambda o: LR.CosineAnnealingLR(o, T_max=10, eta_min=1e-4),
    "lambda": lambda o: LR.LambdaLR(o, lambda e: 1.0 / (1.0 + 0.3 * e)),
    "exp": lambda o: LR.ExponentialLR(o, gamma=0.9),
    "linear": lambda o: LR.LinearLR(o, start_factor=0.25, total_iters=6),
    "multistep": lambda o: LR.MultiStepLR(o, milestones=[4, 11, 30], gamma=0.3),
    "onecycle": lambda o: LR.OneCycleLR(o, max_lr=0.05, total_steps=60),
    "sequential": lambda o: LR.SequentialLR(o, [LR.LinearLR(o, start_factor=0.1, total_iters=4),
                                                LR.CosineAnnealingLR(o, T_max=20)], milestones=[4]),
    "chained": lambda o: LR.ChainedScheduler([LR.StepLR(o, step_size=5, gamma=0.7),
                                              LR.ExponentialLR(o, gamma=0.95)]),
}


def whole_step_family(opt_name, sched_name, clip="norm"):
    def build(C):
        rng = np.random.default_rng(7)
        model = mlp(0)
        opt = OPTS[opt_name](model.parameters())
        sched = SCHEDS[sched_name](opt)
        loss_fn = nn.CrossEntropyLoss()

        @C
        def train_step(x, y):
            opt.zero_grad()
            logits = model(x)
            loss = loss_fn(logits, y)
            loss.backward()
            if clip == "norm":
                norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            else:
                nn.utils.clip_grad_value_(model.parameters(), 0.05)
                norm = None
            opt.step()
            if sched is not None:
                sched.step()
            return loss, norm

        def step(i):
            if i == 3:                       # lr by hand, outside
                for g in opt.param_groups:
                    g["lr"] = g["lr"] * 0.5
            if i == 10:                      # freeze the first layer
                model[0].requires_grad_(False)
            if i == 25:
                model[0].requires_grad_(True)
            if i == 40:
                model.eval()
            x, y = batch(rng)
            return train_step(x, y)

        return {"step": step, "snap": lambda: snap(model, opt, sched)}
    build.__name__ = f"whole_{opt_name}_{sched_name}_{clip}"
    return build


_PAIRS = [
    ("sgd", "none"), ("sgd", "step"), ("sgd_mom", "cosine"), ("sgd_mom", "onecycle"),
    ("sgd_nesterov_wd", "lambda"), ("sgd_nesterov_wd", "multistep"), ("sgd_dampening", "exp"),
    ("adam", "step"), ("adam", "onecycle"), ("adam", "sequential"), ("adam_amsgrad_wd", "cosine"),
    ("adam_amsgrad_wd", "chained"), ("adamw", "cosine"), ("adamw", "linear"), ("adamw", "lambda"),
    ("rmsprop", "exp"), ("rmsprop", "multistep"), ("rmsprop_centered_mom", "step"),
    ("rmsprop_centered_mom", "sequential"), ("sgd_mom", "chained"),
]
for _o, _s in _PAIRS:
    _b = whole_step_family(_o, _s)
    CASES[_b.__name__] = (_b, 42, "equal", "")
for _o, _s in [("sgd_mom", "step"), ("adam", "cosine"), ("rmsprop", "none"), ("adamw", "onecycle")]:
    _b = whole_step_family(_o, _s, clip="value")
    CASES[_b.__name__] = (_b, 42, "equal", "")


# ----------------------------------------------------------------------------- family B:
# hand-written training programs

@case(n=20)
def add_param_group_mid_run(C):
    rng = np.random.default_rng(1)
    body = mlp(0)
    head = nn.Linear(3, 2, rng=5)
    opt = tt.optim.SGD(body.parameters(), lr=0.1, momentum=0.9)
    mse = nn.MSELoss()

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = mse(head(tt.tanh(body(x))), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:                               # the head joins the optimizer mid-run
            opt.add_param_group({"params": head.parameters(), "lr": 0.02})
        x = rng.standard_normal((8, 4))
        return train_step(x, rng.standard_normal((8, 2)))
    return {"step": step, "snap": lambda: snap(body, head, opt)}


@case(n=42)
def add_param_group_adam_with_schedule(C):
    rng = np.random.default_rng(2)
    a, b = mlp(0), mlp(3, d_in=3, d_out=1)
    opt = tt.optim.Adam(a.parameters(), lr=0.01)
    sched = LR.StepLR(opt, step_size=4, gamma=0.5)

    @C
    def train_step(x, y):
        opt.zero_grad()
        b.zero_grad()
        loss = ((b(a(x)) - y) ** 2).mean()
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def step(i):
        if i == 3:
            opt.add_param_group({"params": list(b.parameters()), "lr": 0.003})
        if i == 10:
            opt.param_groups[1]["lr"] = 0.03
        if i == 40:
            opt.param_groups[0]["betas"] = (0.5, 0.9)
        return train_step(rng.standard_normal((6, 4)), rng.standard_normal((6, 1)))
    return {"step": step, "snap": lambda: snap(a, b, opt, sched)}


@case(n=20)
def freeze_unfreeze_adam(C):
    rng = np.random.default_rng(3)
    model = nn.Sequential(nn.Linear(4, 8, rng=0), nn.ReLU(), nn.Linear(8, 8, rng=1), nn.ReLU(),
                          nn.Linear(8, 3, rng=2))
    opt = tt.optim.Adam(model.parameters(), lr=0.01)
    ce = nn.CrossEntropyLoss()

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = ce(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            for p in model[0].parameters():
                p.requires_grad_(False)
        if i == 10:
            model[2].requires_grad_(False)
            model[0].requires_grad_(True)
        if i == 15:
            for p in model.parameters():
                p.requires_grad_(True)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=12)
def freeze_all_then_backward(C):
    rng = np.random.default_rng(4)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            model.requires_grad_(False)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def train_eval_switch_dropout_batchnorm(C):
    rng = np.random.default_rng(5)
    model = nn.Sequential(nn.Linear(4, 16, rng=0), nn.BatchNorm1d(16), nn.ReLU(),
                          nn.Dropout(0.3, rng=9), nn.Linear(16, 3, rng=1))
    opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ce = nn.CrossEntropyLoss()

    @C
    def train_step(x, y):
        opt.zero_grad()
        out = model(x)
        loss = ce(out, y)
        loss.backward()
        opt.step()
        return loss, out.detach()

    def step(i):
        if i == 3:
            model.eval()
        if i == 10:
            model.train()
        if i == 14:
            model[3].eval()                 # dropout alone off
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def separate_train_and_eval_fns_sharing_model(C):
    rng = np.random.default_rng(6)
    model = nn.Sequential(nn.Linear(4, 16, rng=0), nn.BatchNorm1d(16), nn.GELU(),
                          nn.Dropout(0.2), nn.Linear(16, 3, rng=1))
    opt = tt.optim.AdamW(model.parameters(), lr=0.01)
    ce = nn.CrossEntropyLoss()

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = ce(model(x), y)
        loss.backward()
        opt.step()
        return loss

    @C
    def evaluate(x, y):
        logits = model(x)
        acc = (tt.argmax(logits, axis=1) == y).mean()
        return ce(logits, y), acc

    def step(i):
        model.train()
        loss = train_step(*batch(rng))
        model.eval()
        with tt.no_grad():
            ev = evaluate(*batch(rng, n=32))
        model.train()
        return loss, ev
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def state_dict_save_load_mid_run(C):
    rng = np.random.default_rng(8)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.02)
    sched = LR.CosineAnnealingLR(opt, T_max=15)
    saved = {}

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def step(i):
        if i == 3:
            saved["m"], saved["o"], saved["s"] = model.state_dict(), opt.state_dict(), sched.state_dict()
        if i == 10:
            model.load_state_dict(saved["m"])
            opt.load_state_dict(saved["o"])
            sched.load_state_dict(saved["s"])
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


@case(n=20)
def load_state_dict_from_other_model(C):
    rng = np.random.default_rng(9)
    model, other = mlp(0), mlp(10)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss(label_smoothing=0.1)(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            model.load_state_dict(other.state_dict())
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def checkpoint_roundtrip_via_tt_save(C):
    import tempfile
    rng = np.random.default_rng(10)
    model = nn.Sequential(nn.Linear(4, 8, rng=0), nn.BatchNorm1d(8), nn.Linear(8, 2, rng=1))
    opt = tt.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.3)
    d = tempfile.mkdtemp(prefix="r16b")
    path = os.path.join(d, "ck.npz")

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            tt.save({"m": model.state_dict(), "o": opt.state_dict()}, path)
        if i == 10:
            ck = tt.load(path)
            model.load_state_dict(ck["m"])
            opt.load_state_dict(ck["o"])
        return train_step(rng.standard_normal((8, 4)), rng.standard_normal((8, 2)))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=24)
def grad_accumulation_micro_step_compiled(C):
    rng = np.random.default_rng(11)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    k = 3

    @C
    def micro(x, y):
        loss = nn.CrossEntropyLoss()(model(x), y) / k
        loss.backward()
        return loss

    def step(i):
        loss = micro(*batch(rng, n=4))
        if i % k == k - 1:
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
        return loss
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def grad_accumulation_loop_inside(C):
    rng = np.random.default_rng(12)
    model = mlp(0, act=nn.ReLU())
    opt = tt.optim.Adam(model.parameters(), lr=0.01)
    sched = LR.ExponentialLR(opt, gamma=0.95)

    @C
    def train_step(xs, ys):
        opt.zero_grad()
        total = 0.0
        for x, y in zip(xs, ys):
            loss = nn.CrossEntropyLoss()(model(x), y) / len(xs)
            loss.backward()
            total = total + loss.detach()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        sched.step()
        return total

    def step(i):
        m = 2 if i < 10 else 4
        xs, ys = zip(*[batch(rng, n=4) for _ in range(m)])
        return train_step(list(xs), list(ys))
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


@case(n=24)
def grad_accumulation_int_counter_argument(C):
    rng = np.random.default_rng(13)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05)

    @C
    def train_step(x, y, it):
        loss = nn.CrossEntropyLoss()(model(x), y) / 4
        loss.backward()
        if it % 4 == 3:
            opt.step()
            opt.zero_grad()
        return loss

    def step(i):
        return train_step(*batch(rng), i)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=30)
def early_stopping_outside(C):
    rng = np.random.default_rng(14)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.3)
    state = {"best": float("inf"), "bad": 0, "stopped": False}
    xv, yv = batch(np.random.default_rng(99), n=32)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    @C
    def val_loss(x, y):
        with tt.no_grad():
            return nn.CrossEntropyLoss()(model(x), y)

    def step(i):
        if state["stopped"]:
            return val_loss(xv, yv)
        loss = train_step(*batch(rng))
        v = float(val_loss(xv, yv))
        if v < state["best"] - 1e-3:
            state["best"], state["bad"] = v, 0
        else:
            state["bad"] += 1
            if state["bad"] >= 3:
                state["stopped"] = True
        return loss, v
    return {"step": step, "snap": lambda: snap(model, opt, dict(state))}


@case(n=20)
def control_flow_on_loss_before_backward(C):
    rng = np.random.default_rng(15)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        if loss > 1.1:                              # a guard read before the step
            loss = loss * 0.5
        elif float(loss.detach()) < 0.5:
            loss = loss + tt.sum(tt.square(model[0].weight)) * 1e-3
        loss.backward()
        opt.step()
        return loss

    def step(i):
        x, y = batch(rng)
        if i == 10:
            x = x * 5
        return train_step(x, y)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def while_loop_on_tensor_value(C):
    rng = np.random.default_rng(16)
    model = mlp(0, d_out=1)
    opt = tt.optim.Adam(model.parameters(), lr=0.05)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        scale = 1.0
        while (loss * scale) > 2.0:
            scale = scale * 0.5
        (loss * scale).backward()
        opt.step()
        return loss, scale

    def step(i):
        x = rng.standard_normal((8, 4))
        y = rng.standard_normal((8, 1)) * (10 if i in (3, 10) else 1)
        return train_step(x, y)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def metrics_inside_step(C):
    rng = np.random.default_rng(17)
    model = mlp(0, d_out=4)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = nn.CrossEntropyLoss()(logits, y)
        pred = tt.argmax(logits, axis=-1)
        correct = (pred == y).sum()
        probs = tt.softmax(logits.detach(), axis=-1)
        conf = probs.max(axis=-1).mean()
        loss.backward()
        gnorm = nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        return {"loss": loss, "correct": correct, "conf": conf, "gnorm": gnorm}

    def step(i):
        return train_step(*batch(rng, c=4))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def ema_inside_step(C):
    rng = np.random.default_rng(18)
    model = mlp(0)
    ema = mlp(0)
    ema.requires_grad_(False)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def train_step(x, y, decay):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        with tt.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.mul_(decay).add_(p * (1 - decay))
        return loss

    def step(i):
        decay = 0.9 if i < 10 else 0.99
        return train_step(*batch(rng), decay)
    return {"step": step, "snap": lambda: snap(model, ema, opt)}


@case(n=20)
def ema_outside_compiled_eval_of_ema(C):
    rng = np.random.default_rng(19)
    model, ema = mlp(0), mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    @C
    def ema_eval(x):
        return tt.softmax(ema(x), axis=-1)

    def step(i):
        loss = train_step(*batch(rng))
        with tt.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.data *= 0.8
                e.data += 0.2 * p.data
        if i == 10:
            for e, p in zip(ema.parameters(), model.parameters()):
                e.data = p.data.copy()
        return loss, ema_eval(rng.standard_normal((5, 4)))
    return {"step": step, "snap": lambda: snap(model, ema, opt)}


@case(n=24)
def swa_running_average_with_float_count(C):
    rng = np.random.default_rng(20)
    model = mlp(0)
    swa = [tt.tensor(p.data.copy()) for p in model.parameters()]
    opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    @C
    def train_step(x, y, n):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        with tt.no_grad():
            for a, p in zip(swa, model.parameters()):
                a.mul_(n / (n + 1.0)).add_(p / (n + 1.0))
        return loss

    def step(i):
        return train_step(*batch(rng), float(i + 1))
    return {"step": step, "snap": lambda: snap(model, swa, opt)}


@case(n=16)
def swa_running_average_with_int_count(C):
    rng = np.random.default_rng(21)
    model = mlp(0)
    swa = [tt.tensor(p.data.copy()) for p in model.parameters()]
    opt = tt.optim.SGD(model.parameters(), lr=0.05)

    @C
    def train_step(x, y, n):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        with tt.no_grad():
            for a, p in zip(swa, model.parameters()):
                a.mul_(n / (n + 1)).add_(p / (n + 1))
        return loss

    def step(i):
        return train_step(*batch(rng), i + 1)
    return {"step": step, "snap": lambda: snap(model, swa, opt)}


@case(n=20)
def recompiled_from_same_function(C):
    rng = np.random.default_rng(22)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)
    sched = LR.StepLR(opt, 4, 0.5)

    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss
    holder = {"f": C(train_step)}

    def step(i):
        if i in (3, 10):
            holder["f"] = C(train_step)
        if i == 12:
            holder["f2"] = C(train_step)
        f = holder["f2"] if i >= 12 and i % 2 else holder["f"]
        return f(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


@case(n=20)
def forward_hook_added_and_removed(C):
    rng = np.random.default_rng(23)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    handles = {}

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            handles["h"] = model[1].register_forward_hook(lambda m, a, out: out * 0.5)
        if i == 10:
            handles["p"] = model[0].register_forward_pre_hook(lambda m, a: (a[0] * 2.0,))
        if i == 14:
            handles["h"].remove()
        if i == 17:
            handles["p"].remove()
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def forward_hook_reads_mutable_config(C):
    rng = np.random.default_rng(24)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    cfg = {"scale": 1.0}
    model[0].register_forward_hook(lambda m, a, out: out * cfg["scale"])

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            cfg["scale"] = 0.25
        if i == 10:
            cfg["scale"] = 3.0
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def tensor_hook_registered_outside_midrun(C):
    rng = np.random.default_rng(25)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            model[2].weight.register_hook(lambda g: g * 0.0)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=12)
def tensor_hook_registered_inside(C):
    rng = np.random.default_rng(26)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        h = model[1](model[0](x))
        h.register_hook(lambda g: g * 2.0)          # a hook on a Tensor made inside
        loss = nn.CrossEntropyLoss()(model[2](h), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def submodule_replaced_mid_run(C):
    rng = np.random.default_rng(27)
    model = Net(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            model.act = nn.ReLU()
        if i == 10:
            model.act = nn.LeakyReLU(0.2)
        if i == 12:
            model.act.negative_slope = 0.05
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def parameter_replaced_mid_run_optimizer_keeps_old(C):
    rng = np.random.default_rng(28)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            model[2].bias = nn.Parameter(np.zeros(3, np.float32))
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def data_assigned_outside(C):
    rng = np.random.default_rng(29)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            model[0].weight.data = model[0].weight.data * 0.5
        if i == 10:
            nn.init.kaiming_uniform_(model[2].weight, rng=3)
        if i == 12:
            nn.init.zeros_(model[2].bias)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def model_to_float64_mid_run(C):
    rng = np.random.default_rng(30)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            model.to(np.float64)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def vector_to_parameters_outside(C):
    rng = np.random.default_rng(31)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss, nn.utils.parameters_to_vector(model.parameters()).detach()

    def step(i):
        if i in (3, 10):
            v = nn.utils.parameters_to_vector(model.parameters()).detach()
            nn.utils.vector_to_parameters(v * 0.9, model.parameters())
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def lr_changed_by_hand_each_phase(C):
    rng = np.random.default_rng(32)
    model = mlp(0)
    opt = tt.optim.SGD([{"params": model[0].parameters()},
                        {"params": model[2].parameters(), "lr": 0.01}], lr=0.1, momentum=0.9)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            opt.param_groups[0]["lr"] = 0.02
        if i == 10:
            opt.param_groups[1]["lr"] = 0.5
            opt.param_groups[0]["momentum"] = 0.0
        if i == 15:
            opt.param_groups[1]["weight_decay"] = 0.1
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def momentum_switched_on_mid_run(C):
    rng = np.random.default_rng(33)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            opt.param_groups[0]["momentum"] = 0.9
        if i == 10:
            opt.param_groups[0]["nesterov"] = True
        if i == 14:
            opt.param_groups[0]["dampening"] = 0.5
            opt.param_groups[0]["nesterov"] = False
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def adam_hyperparameters_changed(C):
    rng = np.random.default_rng(34)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            opt.param_groups[0]["betas"] = (0.8, 0.99)
        if i == 10:
            opt.param_groups[0]["lr"] = 0.003
        if i == 13:
            opt.param_groups[0]["eps"] = 1e-3
            opt.param_groups[0]["weight_decay"] = 0.01
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def rmsprop_centered_toggled(C):
    rng = np.random.default_rng(35)
    model = mlp(0)
    opt = tt.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.5, centered=True)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            opt.param_groups[0]["eps"] = 1e-4
        if i == 10:
            opt.param_groups[0]["momentum"] = 0.9
        if i == 12:
            opt.param_groups[0]["alpha"] = 0.5
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def optimizer_state_cleared(C):
    rng = np.random.default_rng(36)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            opt.state.clear()
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def optimizer_rebuilt_mid_run(C):
    rng = np.random.default_rng(37)
    model = mlp(0)
    box = {"opt": tt.optim.SGD(model.parameters(), lr=0.1)}

    @C
    def train_step(x, y):
        opt = box["opt"]
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            box["opt"] = tt.optim.Adam(model.parameters(), lr=0.01)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, box["opt"])}


@case(n=20)
def scheduler_replaced_via_global(C):
    rng = np.random.default_rng(38)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    g = {"sched": LR.StepLR(opt, 2, 0.5)}

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        g["sched"].step()
        return loss

    def step(i):
        if i == 10:
            opt.param_groups[0]["lr"] = 0.1
            g["sched"] = LR.CosineAnnealingLR(opt, T_max=5)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt, g["sched"])}


@case(n=24)
def reduce_on_plateau_outside(C):
    rng = np.random.default_rng(39)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.05)
    sched = LR.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    xv, yv = batch(np.random.default_rng(5), n=32)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    @C
    def val(x, y):
        with tt.no_grad():
            return nn.CrossEntropyLoss()(model(x), y)

    def step(i):
        loss = train_step(*batch(rng))
        v = val(xv, yv)
        sched.step(float(v))
        return loss, v
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


@case(n=12, expect="refused")
def reduce_on_plateau_inside(C):
    rng = np.random.default_rng(40)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05)
    sched = LR.ReduceLROnPlateau(opt, factor=0.5, patience=0)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        sched.step(loss)
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt, sched)}


@case(n=12, expect="refused")
def lr_read_after_sched_step_inside(C):
    rng = np.random.default_rng(41)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05)
    sched = LR.StepLR(opt, 2)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss, sched.get_last_lr()[0]

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt, sched)}


@case(n=20)
def lr_read_before_sched_step_inside(C):
    rng = np.random.default_rng(42)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05)
    sched = LR.StepLR(opt, 2, 0.5)

    @C
    def train_step(x, y):
        lr = opt.param_groups[0]["lr"]
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss, lr

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt, sched)}


@case(n=12, expect="refused")
def item_after_step_inside(C):
    rng = np.random.default_rng(43)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt)}


@case(n=12, expect="refused")
def history_list_appended_inside(C):
    rng = np.random.default_rng(44)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05)
    history = []

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        history.append(loss.detach())
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt, len(history))}


@case(n=12)
def lr_set_inside_from_argument(C):
    rng = np.random.default_rng(45)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05)

    @C
    def train_step(x, y, lr):
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return {"step": lambda i: train_step(*batch(rng), 0.1 / (1 + i)), "snap": lambda: snap(model, opt)}


@case(n=42)
def cosine_lr_as_float_argument_manual_sgd(C):
    rng = np.random.default_rng(46)
    model = mlp(0, dtype=np.float64)
    params = list(model.parameters())

    @C
    def train_step(x, y, lr):
        loss = nn.CrossEntropyLoss()(model(x), y)
        g = tt.grad(lambda ps: nn.CrossEntropyLoss()(nn.functional_call(
            model, dict(zip([n for n, _ in model.named_parameters()], ps)), x), y))(params)
        with tt.no_grad():
            for p, gp in zip(params, g):
                p -= lr * gp
        return loss

    def step(i):
        lr = 0.05 * (1 + np.cos(np.pi * i / 42)) / 2
        return train_step(*batch(rng), lr)
    return {"step": step, "snap": lambda: snap(model)}


@case(n=20)
def two_optimizers_gan_style(C):
    rng = np.random.default_rng(47)
    G = nn.Sequential(nn.Linear(2, 8, rng=0), nn.ReLU(), nn.Linear(8, 2, rng=1))
    D = nn.Sequential(nn.Linear(2, 8, rng=2), nn.LeakyReLU(0.2), nn.Linear(8, 1, rng=3))
    optG = tt.optim.Adam(G.parameters(), lr=0.01, betas=(0.5, 0.999))
    optD = tt.optim.Adam(D.parameters(), lr=0.01, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()

    @C
    def gan_step(z, real):
        optD.zero_grad()
        fake = G(z)
        d_loss = bce(D(real), np.ones((len(real), 1))) + bce(D(fake.detach()), np.zeros((len(z), 1)))
        d_loss.backward()
        optD.step()
        optG.zero_grad()
        g_loss = bce(D(fake), np.ones((len(z), 1)))
        g_loss.backward()
        optG.step()
        return d_loss, g_loss

    def step(i):
        if i == 10:
            G.requires_grad_(False)
        if i == 13:
            G.requires_grad_(True)
        return gan_step(rng.standard_normal((8, 2)), rng.standard_normal((8, 2)) + 2)
    return {"step": step, "snap": lambda: snap(G, D, optG, optD)}


@case(n=20)
def dqn_target_network_copy(C):
    rng = np.random.default_rng(48)
    online, target = mlp(0, d_out=2), mlp(0, d_out=2)
    target.requires_grad_(False)
    opt = tt.optim.RMSprop(online.parameters(), lr=0.005)

    @C
    def td_step(s, a, r, s2, done):
        opt.zero_grad()
        with tt.no_grad():
            q_next = tt.max(target(s2), axis=1)
            tgt = r + 0.99 * q_next * (1 - done)
        q = online(s)[np.arange(len(a)), a]
        loss = nn.HuberLoss()(q, tgt)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i in (3, 10):
            for t, o in zip(target.parameters(), online.parameters()):
                t.copy_(o)
        n = 8
        return td_step(rng.standard_normal((n, 4)), rng.integers(0, 2, n),
                       rng.standard_normal(n).astype(np.float32),
                       rng.standard_normal((n, 4)), (rng.random(n) < 0.2).astype(np.float32))
    return {"step": step, "snap": lambda: snap(online, target, opt)}


@case(n=20)
def target_copy_inside_every_k_via_int(C):
    rng = np.random.default_rng(49)
    online, target = mlp(0), mlp(2)
    opt = tt.optim.SGD(online.parameters(), lr=0.05)

    @C
    def step_fn(x, it):
        opt.zero_grad()
        loss = ((online(x) - target(x).detach()) ** 2).mean()
        loss.backward()
        opt.step()
        if it % 5 == 0:
            with tt.no_grad():
                for t, o in zip(target.parameters(), online.parameters()):
                    t.copy_(o)
        return loss

    return {"step": lambda i: step_fn(rng.standard_normal((8, 4)), i),
            "snap": lambda: snap(online, target, opt)}


@case(n=20)
def retain_graph_two_backwards_inside(C):
    rng = np.random.default_rng(50)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05)

    @C
    def train_step(x, y):
        opt.zero_grad()
        out = model(x)
        l1 = nn.CrossEntropyLoss()(out, y)
        l2 = (out ** 2).mean() * 0.1
        l1.backward(retain_graph=True)
        l2.backward()
        opt.step()
        return l1, l2

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt)}


@case(n=20)
def compiled_loss_backward_outside_retain_graph(C):
    rng = np.random.default_rng(51)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    @C
    def loss_fn(x, y):
        return nn.CrossEntropyLoss()(model(x), y)

    def step(i):
        opt.zero_grad()
        loss = loss_fn(*batch(rng))
        loss.backward(retain_graph=True)
        if i in (3, 10):
            loss.backward()                       # a second sweep doubles the gradients
        opt.step()
        return loss
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def compiled_loss_called_twice_then_summed(C):
    rng = np.random.default_rng(52)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def loss_fn(x, y):
        return nn.CrossEntropyLoss()(model(x), y)

    def step(i):
        opt.zero_grad()
        a = loss_fn(*batch(rng))
        b = loss_fn(*batch(rng))
        total = a + 0.5 * b
        total.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.3)
        opt.step()
        return total, a, b
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def tt_grad_of_compiled_closed_over(C):
    rng = np.random.default_rng(53)
    W = tt.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    b = tt.tensor(np.zeros(3), requires_grad=True)

    @C
    def loss_fn(x, y):
        return nn.functional.cross_entropy(x @ W + b, y)

    def step(i):
        x, y = batch(rng)
        loss = loss_fn(x, y)
        loss.backward()
        with tt.no_grad():
            W.data -= 0.1 * W.grad
            b.data -= 0.1 * b.grad
        W.grad = None
        b.grad = None
        return loss
    return {"step": step, "snap": lambda: snap(W, b)}


@case(n=16)
def tt_grad_of_compiled_wrt_argument(C):
    rng = np.random.default_rng(54)
    W = rng.standard_normal((4, 3))

    @C
    def loss_fn(W, x, y):
        return tt.crossEntropy(tt.softmax(tt.dot(x, W)), y) + 0.1 * tt.frobeniusNorm(W)

    g = tt.grad(loss_fn)
    state = {"W": W}

    def step(i):
        x = rng.standard_normal((5, 4))
        y = np.eye(3)[rng.integers(0, 3, 5)]
        gw = g(state["W"], x, y)
        state["W"] = state["W"] - 0.1 * gw
        return gw, loss_fn(state["W"], x, y)
    return {"step": step, "snap": lambda: snap(state["W"])}


@case(n=12)
def hvp_compiled(C):
    rng = np.random.default_rng(55)
    model = mlp(0, dtype=np.float64)
    names = [n for n, _ in model.named_parameters()]
    params = {n: p.data for n, p in model.named_parameters()}
    x, y = batch(rng)

    def loss(p):
        return nn.CrossEntropyLoss()(nn.functional_call(model, p, x), y)

    hvp = C(lambda p, v: tt.hvp(loss, (p,), (v,)))

    def step(i):
        v = {n: rng.standard_normal(params[n].shape) for n in names}
        out = hvp(params, v)
        for n in names:
            params[n] -= 0.01 * v[n]
        return out
    return {"step": step, "snap": lambda: snap(model)}


@case(n=12)
def grad_of_grad_compiled(C):
    rng = np.random.default_rng(56)

    def f(w, x):
        return tt.sum(tt.tanh(x @ w) ** 2)

    gg = C(lambda w, x, v: tt.grad(lambda w: tt.sum(tt.grad(f)(w, x) * v))(w))
    w = rng.standard_normal((3, 2))

    def step(i):
        x = rng.standard_normal((4, 3))
        return gg(w, x, rng.standard_normal((3, 2)))
    return {"step": step, "snap": lambda: snap(w)}


@case(n=16)
def gradient_penalty_in_whole_step(C):
    rng = np.random.default_rng(57)
    D = nn.Sequential(nn.Linear(2, 8, rng=0, dtype=np.float64), nn.Tanh(),
                      nn.Linear(8, 1, rng=1, dtype=np.float64))
    opt = tt.optim.Adam(D.parameters(), lr=0.01)

    @C
    def step_fn(x):
        opt.zero_grad()
        gx = tt.grad(lambda z: tt.sum(D(z)))(x)
        penalty = ((tt.sqrt(tt.sum(gx * gx, axis=1)) - 1) ** 2).mean()
        loss = D(x).mean() + 10 * penalty
        loss.backward()
        opt.step()
        return loss

    return {"step": lambda i: step_fn(rng.standard_normal((6, 2))), "snap": lambda: snap(D, opt)}


@case(n=16)
def jvp_through_compiled_result(C):
    rng = np.random.default_rng(58)
    W = tt.tensor(rng.standard_normal((3, 2)), requires_grad=True)

    @C
    def f(x):
        return tt.sum(tt.tanh(x @ W))

    def step(i):
        out = f(rng.standard_normal((4, 3)))
        t = np.full((3, 2), 0.1 * i)
        return out, out.jvp({W: t})
    return {"step": step, "snap": lambda: snap(W)}


@case(n=20)
def lstm_language_model_step(C):
    rng = np.random.default_rng(59)
    emb = nn.Embedding(12, 6, rng=0, padding_idx=0)
    lstm = nn.LSTM(6, 8, batch_first=True)
    head = nn.Linear(8, 12, rng=1)
    params = list(emb.parameters()) + list(lstm.parameters()) + list(head.parameters())
    opt = tt.optim.Adam(params, lr=0.01)
    sched = LR.OneCycleLR(opt, max_lr=0.02, total_steps=30)

    @C
    def train_step(tok, tgt):
        opt.zero_grad()
        out, _ = lstm(emb(tok))
        loss = nn.CrossEntropyLoss(ignore_index=0)(head(out).reshape(-1, 12), tgt.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
        sched.step()
        return loss

    def step(i):
        tok = rng.integers(0, 12, (3, 5))
        if i == 10:
            tok[:, -2:] = 0
        return train_step(tok, np.roll(tok, -1, axis=1))
    return {"step": step, "snap": lambda: snap(emb, lstm, head, opt, sched)}


@case(n=16)
def gru_with_dropout_step(C):
    rng = np.random.default_rng(60)
    gru = nn.GRU(3, 6, num_layers=2, dropout=0.3)
    head = nn.Linear(6, 1, rng=0)
    params = list(gru.parameters()) + list(head.parameters())
    opt = tt.optim.RMSprop(params, lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        out, h = gru(x)
        loss = nn.MSELoss()(head(out[-1]), y)
        loss.backward()
        nn.utils.clip_grad_value_(params, 0.1)
        opt.step()
        return loss, h.detach()

    def step(i):
        if i == 3:
            gru.eval()
        if i == 10:
            gru.train()
        return train_step(rng.standard_normal((5, 4, 3)), rng.standard_normal((4, 1)))
    return {"step": step, "snap": lambda: snap(gru, head, opt)}


@case(n=16)
def cnn_step_with_batchnorm(C):
    rng = np.random.default_rng(61)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, rng=0), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.25, rng=1),
                          nn.Linear(4 * 3 * 3, 3, rng=2))
    opt = tt.optim.AdamW(model.parameters(), lr=0.01)
    sched = LR.CosineAnnealingLR(opt, T_max=16)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def step(i):
        if i == 10:
            model[1].momentum = 0.5
        return train_step(rng.uniform(size=(4, 1, 6, 6)), rng.integers(0, 3, 4))
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


@case(n=16)
def batchnorm_cumulative_momentum_none(C):
    rng = np.random.default_rng(62)
    bn = nn.BatchNorm1d(5, momentum=None)
    lin = nn.Linear(5, 2, rng=0)
    opt = tt.optim.SGD(list(bn.parameters()) + list(lin.parameters()), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.MSELoss()(lin(bn(x)), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            bn.eval()
        return train_step(rng.standard_normal((8, 5)), rng.standard_normal((8, 2)))
    return {"step": step, "snap": lambda: snap(bn, lin, opt)}


@case(n=16)
def attention_block_step(C):
    rng = np.random.default_rng(63)
    attn = nn.MultiheadAttention(8, 2, dropout=0.1, batch_first=True)
    ln = nn.LayerNorm(8)
    head = nn.Linear(8, 4, rng=0)
    params = list(attn.parameters()) + list(ln.parameters()) + list(head.parameters())
    opt = tt.optim.AdamW(params, lr=0.003)

    @C
    def train_step(x, y):
        opt.zero_grad()
        h, w = attn(x, x, x)
        h = ln(h + x)
        loss = nn.CrossEntropyLoss()(head(h.mean(axis=1)), y)
        loss.backward()
        opt.step()
        return loss, w.detach()

    def step(i):
        if i == 10:
            attn.eval()
        return train_step(rng.standard_normal((3, 5, 8)).astype(np.float32), rng.integers(0, 4, 3))
    return {"step": step, "snap": lambda: snap(attn, ln, head, opt)}


@case(n=16)
def tied_embedding_and_head(C):
    rng = np.random.default_rng(64)
    emb = nn.Embedding(10, 6, rng=0)
    head = nn.Linear(6, 10, bias=False, rng=1)
    head.weight = emb.weight
    params = list(emb.parameters())
    opt = tt.optim.SGD(params, lr=0.1, momentum=0.9)

    @C
    def train_step(tok, tgt):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(head(tt.tanh(emb(tok))), tgt)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        t = rng.integers(0, 10, 7)
        return train_step(t, np.roll(t, 1))
    return {"step": step, "snap": lambda: snap(emb, head, opt)}


@case(n=16)
def gelu_layernorm_residual_mlp(C):
    rng = np.random.default_rng(65)
    model = Net(0, d_in=6, h=12, d_out=6, act=nn.GELU())
    ln = nn.LayerNorm(6)
    opt = tt.optim.Adam(list(model.parameters()) + list(ln.parameters()), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.SmoothL1Loss(beta=0.5)(ln(x + model(x)), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            model.act = nn.GELU(approximate="tanh")
        return train_step(rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal((5, 6)))
    return {"step": step, "snap": lambda: snap(model, ln, opt)}


@case(n=16)
def weighted_ce_ignore_index_changes(C):
    rng = np.random.default_rng(66)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    ce = nn.CrossEntropyLoss(weight=np.array([1.0, 2.0, 0.5]), ignore_index=-1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = ce(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        x, y = batch(rng)
        if i >= 3:
            y[:4] = -1
        if i == 10:
            y[:] = -1                                 # every label ignored: a 0/0
        return train_step(x, y)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def bce_pos_weight_changed(C):
    rng = np.random.default_rng(67)
    model = mlp(0, d_out=1)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=np.array([2.0]))

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            loss_fn.pos_weight = np.array([0.5])
        return train_step(rng.standard_normal((8, 4)), rng.integers(0, 2, (8, 1)).astype(np.float64))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def loss_scale_float_argument_changing(C):
    rng = np.random.default_rng(68)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y, scale):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        (loss * scale).backward()
        opt.step()
        return loss

    def step(i):
        return train_step(*batch(rng), 2.0 ** (i % 5))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def global_config_changed(C):
    rng = np.random.default_rng(69)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x) / _CFG["temperature"], y)
        if _CFG["l2"]:
            loss = loss + _CFG["l2"] * sum(tt.sum(p * p) for p in model.parameters())
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), _CFG["clip"])
        opt.step()
        return loss

    _CFG.update(temperature=1.0, l2=0.0, clip=1.0)

    def step(i):
        if i == 3:
            _CFG["temperature"] = 2.0
        if i == 10:
            _CFG["l2"] = 1e-3
        if i == 12:
            _CFG["clip"] = 0.1
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt, dict(_CFG))}


_CFG = {}


@case(n=16)
def config_object_attribute_changed(C):
    rng = np.random.default_rng(70)

    class Cfg:
        pass
    cfg = Cfg()
    cfg.clip, cfg.use_clip, cfg.norm_type = 0.5, True, 2
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        if cfg.use_clip:
            nn.utils.clip_grad_norm_(model.parameters(), cfg.clip, norm_type=cfg.norm_type)
        opt.step()
        return loss

    def step(i):
        if i == 3:
            cfg.clip = 0.05
        if i == 10:
            cfg.norm_type = 1
        if i == 12:
            cfg.use_clip = False
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def default_argument_mutated(C):
    rng = np.random.default_rng(71)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y, opts={"smooth": 0.0}):  # noqa: B006 - the default is the point
        opt.zero_grad()
        loss = nn.CrossEntropyLoss(label_smoothing=opts["smooth"])(model(x), y)
        loss.backward()
        opt.step()
        return loss
    f = C(train_step)

    def step(i):
        if i == 3:
            train_step.__defaults__[0]["smooth"] = 0.2
        return f(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def method_decorator_two_trainers(C):
    rng = np.random.default_rng(72)

    class Trainer:
        def __init__(self, seed, lr):
            self.model = mlp(seed)
            self.opt = tt.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)

        @C
        def step(self, x, y):
            self.opt.zero_grad()
            loss = nn.CrossEntropyLoss()(self.model(x), y)
            loss.backward()
            self.opt.step()
            return loss

    a, b = Trainer(0, 0.1), Trainer(5, 0.02)

    def step(i):
        x, y = batch(rng)
        if i == 10:
            b.opt.param_groups[0]["lr"] = 0.3
        return a.step(x, y), b.step(x, y)
    return {"step": step, "snap": lambda: snap(a.model, a.opt, b.model, b.opt)}


@case(n=16)
def returns_parameter_and_detached_outputs(C):
    rng = np.random.default_rng(73)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = nn.CrossEntropyLoss()(logits, y)
        loss.backward()
        opt.step()
        return loss.detach(), logits.detach(), model[2].bias, (loss.detach() * 2, [loss])

    def step(i):
        out = train_step(*batch(rng))
        assert out[2] is model[2].bias
        return out
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def module_list_grows(C):
    rng = np.random.default_rng(74)

    class Deep(nn.Module):
        def __init__(self):
            self.inp = nn.Linear(4, 6, rng=0)
            self.blocks = nn.ModuleList([nn.Linear(6, 6, rng=1)])
            self.out = nn.Linear(6, 2, rng=9)

        def forward(self, x):
            h = tt.tanh(self.inp(x))
            for b in self.blocks:
                h = h + tt.tanh(b(h))
            return self.out(h)

    model = Deep()
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            blk = nn.Linear(6, 6, rng=2)
            model.blocks.append(blk)
            opt.add_param_group({"params": blk.parameters()})
        return train_step(rng.standard_normal((8, 4)), rng.standard_normal((8, 2)))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def module_dict_branch_by_string_argument(C):
    rng = np.random.default_rng(75)
    heads = nn.ModuleDict({"a": nn.Linear(4, 2, rng=0), "b": nn.Linear(4, 2, rng=1)})
    opt = tt.optim.SGD(heads.parameters(), lr=0.1)

    @C
    def train_step(x, y, task):
        opt.zero_grad()
        loss = nn.MSELoss()(heads[task](x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        return train_step(rng.standard_normal((5, 4)), rng.standard_normal((5, 2)), "ab"[i % 2])
    return {"step": step, "snap": lambda: snap(heads, opt)}


@case(n=16)
def grad_not_zeroed_accumulates_across_calls(C):
    rng = np.random.default_rng(76)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i in (3, 10):
            opt.zero_grad()
        if i == 12:
            model[0].weight.grad = np.ones_like(model[0].weight.data)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def module_zero_grad_inside(C):
    rng = np.random.default_rng(77)
    model = mlp(0)
    opt = tt.optim.RMSprop(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        model.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt)}


@case(n=16)
def batch_size_and_dtype_change(C):
    rng = np.random.default_rng(78)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        n = 16 if i < 3 else (5 if i < 10 else 16)
        x, y = batch(rng, n=n)
        if i >= 10:
            x = x.astype(np.float32)
        if i >= 12:
            y = np.eye(3)[y]
        return train_step(x, y)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def grad_mode_off_for_one_call(C):
    rng = np.random.default_rng(79)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            with tt.no_grad():
                return train_step(*batch(rng))
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def dropout_global_generator_reseeded(C):
    rng = np.random.default_rng(80)
    model = nn.Sequential(nn.Linear(4, 16, rng=0), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3, rng=1))
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            tt.manual_seed(5)
        if i == 10:
            st = tt.get_rng_state()
            tt.rand(3)
            tt.set_rng_state(st)
        if i == 12:
            model[2].p = 0.1
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def dropout_own_rng_state_restored(C):
    rng = np.random.default_rng(81)
    model = nn.Sequential(nn.Linear(4, 16, rng=0), nn.ReLU(), nn.Dropout(0.5, rng=3), nn.Linear(16, 3, rng=1))
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    saved = {}

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            saved["sd"] = model.state_dict()
        if i == 10:
            model.load_state_dict(saved["sd"])
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt, model[2].state_dict())}


@case(n=16)
def noise_injection_with_generator(C):
    rng = np.random.default_rng(82)
    gen = np.random.default_rng(3)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def train_step(x, y, sigma):
        opt.zero_grad()
        xn = x + sigma * tt.randn(*x.shape, rng=gen)
        loss = nn.CrossEntropyLoss()(model(xn), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            gen.standard_normal(3)                     # the generator advanced outside
        return train_step(*batch(rng), 0.1)
    return {"step": step, "snap": lambda: snap(model, opt, gen)}


@case(n=12, expect="refused")
def numpy_global_random_inside(C):
    rng = np.random.default_rng(83)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        x = x + np.random.standard_normal(x.shape) * 0.01
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        np.random.seed(i)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=12)
def reads_grad_inside_for_manual_update(C):
    rng = np.random.default_rng(84)
    model = mlp(0)

    @C
    def train_step(x, y):
        for p in model.parameters():
            p.grad = None
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        with tt.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model)}


@case(n=20)
def ema_decay_schedule_list_outside(C):
    rng = np.random.default_rng(85)
    model = mlp(0)
    shadow = {n: tt.tensor(p.data.copy()) for n, p in model.named_parameters()}
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    decays = [0.5]

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        d = decays[-1]
        with tt.no_grad():
            for n, p in model.named_parameters():
                shadow[n].sub_((shadow[n] - p) * (1 - d))
        return loss

    def step(i):
        if i in (3, 10):
            decays.append(decays[-1] + 0.2)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt, shadow)}


@case(n=20)
def clamp_weights_after_step_inside(C):
    rng = np.random.default_rng(86)
    model = mlp(0)
    opt = tt.optim.RMSprop(model.parameters(), lr=0.05)

    @C
    def train_step(x, y, c):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        with tt.no_grad():
            for p in model.parameters():
                p.clamp_(-c, c)
        return loss

    def step(i):
        c = 0.3 if i < 10 else 0.1
        return train_step(*batch(rng), c)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def weight_norm_projection_inside(C):
    rng = np.random.default_rng(87)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.5)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        with tt.no_grad():
            w = model[0].weight
            norms = tt.sqrt(tt.sum(w * w, axis=1, keepdims=True))
            w.copy_(w / tt.maximum(norms, 1.0))
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt)}


@case(n=16)
def functional_call_value_and_grad_object_style(C):
    rng = np.random.default_rng(88)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    named = dict(model.named_parameters())
    params = {k: p.data for k, p in named.items()}

    def model_loss(params, x, y):
        return nn.CrossEntropyLoss()(nn.functional_call(model, params, x), y)
    step_fn = C(tt.value_and_grad(model_loss))

    def step(i):
        if i == 10:                    # .data rebinding: the dict now holds stale arrays (as eagerly)
            model[0].bias.data = model[0].bias.data + 1.0
        loss, grads = step_fn(params, *batch(rng))
        for k, g in grads.items():
            named[k].grad = g
        opt.step()
        return loss, grads
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def vmap_per_example_grad_norms_clipped_dp_sgd(C):
    rng = np.random.default_rng(89)
    W = rng.standard_normal((4, 3)) * 0.1
    state = {"W": W}

    def per_loss(W, x, y):
        return tt.crossEntropy(tt.softmax(tt.dot(x[None], W)), y[None])

    @C
    def dp_step(W, x, y, noise, lr):
        g = tt.vmap(tt.grad(per_loss), in_axes=(None, 0, 0))(W, x, y)
        n = tt.sqrt(tt.sum(g * g, axis=(1, 2), keepdims=True))
        g = g / tt.maximum(n / 1.0, 1.0)
        return W - lr * (g.mean(axis=0) + noise)

    def step(i):
        x = rng.standard_normal((6, 4))
        y = np.eye(3)[rng.integers(0, 3, 6)]
        state["W"] = dp_step(state["W"], x, y, rng.standard_normal((4, 3)) * 0.01, 0.1)
        return state["W"]
    return {"step": step, "snap": lambda: snap(state["W"])}


@case(n=16)
def sequential_lr_warmup_with_pass_through_float(C):
    rng = np.random.default_rng(90)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = LR.SequentialLR(opt, [LR.LinearLR(opt, 0.1, total_iters=3), LR.ExponentialLR(opt, 0.9)], [3])

    @C
    def train_step(x, y, wd):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y) + wd * tt.sum(model[0].weight ** 2)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    return {"step": lambda i: train_step(*batch(rng), 1e-3 * (i % 3)),
            "snap": lambda: snap(model, opt, sched)}


@case(n=16)
def lambda_lr_per_group_two_groups(C):
    rng = np.random.default_rng(91)
    model = mlp(0)
    opt = tt.optim.Adam([{"params": model[0].parameters()}, {"params": model[2].parameters()}], lr=0.01)
    sched = LR.LambdaLR(opt, [lambda e: 0.9 ** e, lambda e: 1.0 if e < 5 else 0.1])

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt, sched)}


@case(n=16)
def scheduler_stepped_outside_every_epoch(C):
    rng = np.random.default_rng(92)
    model = mlp(0)
    opt = tt.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
    sched = LR.MultiStepLR(opt, [2, 5], 0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        loss = train_step(*batch(rng))
        if i % 2 == 1:
            sched.step()
        return loss
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


@case(n=16)
def onecycle_momentum_cycling_adam_and_sgd(C):
    rng = np.random.default_rng(93)
    m1, m2 = mlp(0), mlp(4)
    o1 = tt.optim.SGD(m1.parameters(), lr=0.01, momentum=0.9)
    o2 = tt.optim.Adam(m2.parameters(), lr=0.01)
    s1 = LR.OneCycleLR(o1, max_lr=0.1, total_steps=20)
    s2 = LR.OneCycleLR(o2, max_lr=0.05, total_steps=20, three_phase=True)

    @C
    def train_step(x, y):
        o1.zero_grad()
        o2.zero_grad()
        loss = nn.CrossEntropyLoss()(m1(x), y) + nn.CrossEntropyLoss()(m2(x), y)
        loss.backward()
        o1.step()
        o2.step()
        s1.step()
        s2.step()
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(m1, m2, o1, o2, s1, s2)}


@case(n=16)
def print_inside_step(C):
    import io
    rng = np.random.default_rng(94)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    buf = io.StringIO()

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        print("shape", x.shape, file=buf)
        loss.backward()
        opt.step()
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt)}


@case(n=16)
def try_except_around_solve(C):
    rng = np.random.default_rng(95)

    @C
    def solve(a, b):
        try:
            return tt.linalg.solve(a, b) if hasattr(tt, "linalg") else np.linalg.solve(a, b)
        except np.linalg.LinAlgError:
            return b * 0

    def step(i):
        a = rng.standard_normal((3, 3))
        if i in (3, 10):
            a[:, 0] = 0
        return solve(a, rng.standard_normal(3))
    return {"step": step, "snap": lambda: snap()}


@case(n=16)
def int_argument_used_as_shape(C):
    rng = np.random.default_rng(96)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y, k):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x[:k]), y[:k])
        loss.backward()
        opt.step()
        return loss

    def step(i):
        return train_step(*batch(rng), 4 + (i % 3) * 4)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def clip_norm_inf_and_returned(C):
    rng = np.random.default_rng(97)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        n = nn.utils.clip_grad_norm_(model.parameters(), 0.2, norm_type=float("inf"))
        opt.step()
        return loss, n

    return {"step": lambda i: train_step(*batch(rng) if i != 10 else (batch(rng)[0] * 100, batch(rng)[1])),
            "snap": lambda: snap(model, opt)}


@case(n=16)
def kl_distillation_teacher_in_eval(C):
    rng = np.random.default_rng(98)
    teacher = nn.Sequential(nn.Linear(4, 16, rng=7), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3, rng=8))
    student = mlp(0)
    opt = tt.optim.Adam(student.parameters(), lr=0.01)
    teacher.eval()

    @C
    def train_step(x, T):
        opt.zero_grad()
        with tt.no_grad():
            t = tt.softmax(teacher(x) / T, axis=-1)
        s = nn.LogSoftmax()(student(x) / T)
        loss = nn.KLDivLoss(reduction="batchmean")(s, t) * (T * T)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            teacher.train()                             # a mistake a user makes: dropout in the teacher
        return train_step(rng.standard_normal((8, 4)), 2.0 if i < 3 else 4.0)
    return {"step": step, "snap": lambda: snap(student, teacher, opt)}


@case(n=16)
def nll_with_log_softmax_module(C):
    rng = np.random.default_rng(99)
    model = nn.Sequential(nn.Linear(4, 8, rng=0), nn.Softplus(beta=2.0), nn.Linear(8, 3, rng=1),
                          nn.LogSoftmax(dim=-1))
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.NLLLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            model[1].beta = 0.5
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def embedding_padding_idx_bag(C):
    rng = np.random.default_rng(100)
    emb = nn.Embedding(20, 5, padding_idx=0, rng=0)
    clf = nn.Linear(5, 2, rng=1)
    opt = tt.optim.Adam(list(emb.parameters()) + list(clf.parameters()), lr=0.05)

    @C
    def train_step(tok, y):
        opt.zero_grad()
        e = emb(tok)
        mask = (tok != 0).astype(np.float32)[..., None]
        pooled = tt.sum(e * mask, axis=1) / tt.maximum(tt.sum(mask, axis=1), 1.0)
        loss = nn.CrossEntropyLoss()(clf(pooled), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        tok = rng.integers(0, 20, (4, 6))
        tok[:, 4:] = 0
        if i == 10:
            tok[0] = 0
        return train_step(tok, rng.integers(0, 2, 4))
    return {"step": step, "snap": lambda: snap(emb, clf, opt)}


@case(n=16)
def two_compiled_steps_alternating_parts(C):
    rng = np.random.default_rng(101)
    enc, dec = mlp(0, d_out=2), mlp(3, d_in=2, d_out=4)
    opt_e = tt.optim.SGD(enc.parameters(), lr=0.05, momentum=0.9)
    opt_d = tt.optim.Adam(dec.parameters(), lr=0.01)

    @C
    def step_enc(x):
        opt_e.zero_grad()
        loss = nn.MSELoss()(dec(enc(x)), x)
        loss.backward()
        opt_e.step()
        return loss

    @C
    def step_dec(x):
        opt_d.zero_grad()
        loss = nn.L1Loss()(dec(enc(x)), x)
        loss.backward()
        opt_d.step()
        return loss

    def step(i):
        x = rng.standard_normal((8, 4))
        out = (step_enc(x), step_dec(x)) if i % 3 else (step_dec(x), step_enc(x))
        return out
    return {"step": step, "snap": lambda: snap(enc, dec, opt_e, opt_d)}


@case(n=16)
def nonlocal_step_counter_rebinding(C):
    rng = np.random.default_rng(102)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    count = 0

    def train_step(x, y):
        nonlocal count
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        count += 1
        return loss
    f = C(train_step)
    return {"step": lambda i: f(*batch(rng)), "snap": lambda: snap(model, opt, count)}





class Lion(tt.optim.Optimizer):
    """A user's optimizer written the documented way: _check and _update."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    def _check(self, group):
        return group

    def _update(self, p, g, state, group):
        b1, b2 = group["betas"]
        if "exp_avg" not in state:
            state["exp_avg"] = np.zeros_like(p.data)
        m = state["exp_avg"]
        upd = np.sign(b1 * m + (1 - b1) * g)
        p.data *= 1 - group["lr"] * group["weight_decay"]
        p.data -= group["lr"] * upd
        m *= b2
        m += (1 - b2) * g


class PlainSignSGD(tt.optim.Optimizer):
    """A user's optimizer that overrides step() itself and reads p.grad."""

    def __init__(self, params, lr=0.01):
        super().__init__(params, dict(lr=lr))

    def _check(self, group):
        return group

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.data -= group["lr"] * np.sign(p.grad)


@case(n=20)
def custom_optimizer_lion_via_update(C):
    rng = np.random.default_rng(110)
    model = mlp(0)
    opt = Lion(model.parameters(), lr=0.003, weight_decay=0.1)
    sched = LR.CosineAnnealingLR(opt, T_max=12)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def step(i):
        if i == 10:
            opt.param_groups[0]["betas"] = (0.5, 0.5)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


@case(n=16)
def custom_optimizer_overriding_step(C):
    rng = np.random.default_rng(111)
    model = mlp(0)
    opt = PlainSignSGD(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            opt.param_groups[0]["lr"] = 0.1
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def compiled_module_forward_torch_style(C):
    rng = np.random.default_rng(112)
    model = nn.Sequential(nn.Linear(4, 16, rng=0), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2, rng=4),
                          nn.Linear(16, 3, rng=1))
    cmodel = C(model)
    opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = LR.StepLR(opt, 5, 0.5)

    def step(i):
        if i == 3:
            model.eval()
        if i == 10:
            model.train()
        x, y = batch(rng)
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(cmodel(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


@case(n=16)
def compiled_loss_module_object(C):
    rng = np.random.default_rng(113)
    model = mlp(0)
    closs = C(nn.CrossEntropyLoss(label_smoothing=0.05))
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    def step(i):
        opt.zero_grad()
        x, y = batch(rng)
        loss = closs(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def skip_step_on_nonfinite_loss(C):
    rng = np.random.default_rng(114)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        if not bool(tt.isfinite(loss.detach())):
            return loss.detach()
        loss.backward()
        opt.step()
        return loss

    def step(i):
        x, y = batch(rng)
        if i in (3, 10, 11):
            x[0, 0] = np.nan
        return train_step(x, y)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=12)
def skip_step_on_large_grad_norm_after_backward(C):
    rng = np.random.default_rng(115)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        if norm > 5.0:
            opt.zero_grad()
        opt.step()
        return loss

    def step(i):
        x, y = batch(rng)
        return train_step(x * (30 if i in (3, 10) else 1), y)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=20)
def scheduler_restarted_by_hand(C):
    rng = np.random.default_rng(116)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = LR.CosineAnnealingLR(opt, T_max=6)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def step(i):
        if i == 10:
            sched.last_epoch = 0
            for g in opt.param_groups:
                g["lr"] = g["initial_lr"] if "initial_lr" in g else 0.1
        if i == 14:
            sched.T_max = 3
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


@case(n=20)
def two_schedulers_composed_inside(C):
    rng = np.random.default_rng(117)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.02)
    s1 = LR.StepLR(opt, 4, 0.5)
    s2 = LR.ExponentialLR(opt, 0.97)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        s1.step()
        s2.step()
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt, s1, s2)}


@case(n=20)
def lambda_schedule_reads_global_changed(C):
    rng = np.random.default_rng(118)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    _WARM["factor"] = 1.0
    sched = LR.LambdaLR(opt, lambda e: _WARM["factor"] * min(1.0, (e + 1) / 5))

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def step(i):
        if i == 10:
            _WARM["factor"] = 0.1
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


_WARM = {}


@case(n=16)
def requires_grad_attribute_assignment(C):
    rng = np.random.default_rng(119)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            model[2].bias.requires_grad = False
        if i == 10:
            model[2].bias.requires_grad = True
            model[0].weight.requires_grad = False
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def training_flag_set_directly(C):
    rng = np.random.default_rng(120)
    model = nn.Sequential(nn.Linear(4, 8, rng=0), nn.BatchNorm1d(8), nn.Dropout(0.4, rng=1),
                          nn.Linear(8, 3, rng=2))
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            model[1].training = False
        if i == 10:
            model[2].training = False
            model[1].training = True
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def param_appended_to_group_by_hand(C):
    rng = np.random.default_rng(121)
    model = mlp(0)
    opt = tt.optim.SGD(list(model[0].parameters()), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        model[2].zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            opt.param_groups[0]["params"].append(model[2].weight)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def running_loss_and_accuracy_tensors_updated_inside(C):
    rng = np.random.default_rng(122)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    meter = {"loss": tt.zeros(()), "correct": tt.zeros(()), "seen": tt.zeros(())}

    @C
    def train_step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = nn.CrossEntropyLoss()(logits, y)
        loss.backward()
        opt.step()
        with tt.no_grad():
            meter["loss"].mul_(0.9).add_(loss.detach() * 0.1)
            meter["correct"].add_((tt.argmax(logits, axis=1) == y).sum())
            meter["seen"].add_(float(len(y)))
        return loss

    def step(i):
        if i == 10:
            for v in meter.values():
                v.data = np.zeros_like(v.data)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt, meter)}


@case(n=16)
def state_dict_returned_from_step(C):
    rng = np.random.default_rng(123)
    model = nn.Sequential(nn.Linear(4, 8, rng=0), nn.BatchNorm1d(8), nn.Linear(8, 3, rng=1))
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss, model.state_dict()

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt)}


@case(n=16)
def load_state_dict_inside_from_argument(C):
    rng = np.random.default_rng(124)
    model = mlp(0)
    ref = mlp(5)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def reset_and_step(sd, x, y):
        model.load_state_dict(sd)
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        sd = ref.state_dict()
        if i >= 10:
            sd = {k: v * 0.5 for k, v in sd.items()}
        return reset_and_step(sd, *batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def zero_grad_set_to_zeros(C):
    rng = np.random.default_rng(125)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad(set_to_none=False)
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            model[0].requires_grad_(False)
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def input_tensor_requires_grad_adversarial(C):
    rng = np.random.default_rng(126)
    model = mlp(0, dtype=np.float64)
    opt = tt.optim.SGD(model.parameters(), lr=0.05)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        xa, y = batch(rng)
        x = tt.tensor(xa, requires_grad=True)
        loss = train_step(x, y)
        return loss, x.grad
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def loss_and_aux_backward_outside(C):
    rng = np.random.default_rng(127)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def fwd(x, y):
        logits = model(x)
        loss = nn.CrossEntropyLoss()(logits, y)
        return loss, {"logits": logits, "acc": (tt.argmax(logits, axis=1) == y).mean()}

    def step(i):
        opt.zero_grad()
        loss, aux = fwd(*batch(rng))
        (loss + 0.01 * (aux["logits"] ** 2).mean()).backward()
        opt.step()
        return loss, aux
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def compiled_called_inside_compiled(C):
    rng = np.random.default_rng(128)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def loss_fn(x, y):
        return nn.CrossEntropyLoss()(model(x), y)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = loss_fn(x, y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        x, y = batch(rng)
        if i % 4 == 3:
            with tt.no_grad():
                return loss_fn(x, y)
        return train_step(x, y)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def hook_removed_via_with_handle(C):
    rng = np.random.default_rng(129)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    acts = {}

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if 3 <= i < 10:
            with model[0].register_forward_hook(lambda m, a, out: tt.relu(out)):
                return train_step(*batch(rng))
        return train_step(*batch(rng)), len(acts)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def clip_grad_overflow_float32(C):
    rng = np.random.default_rng(130)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        n = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss, n

    def step(i):
        x = rng.standard_normal((8, 4))
        y = rng.standard_normal((8, 3)) * (1e18 if i in (3, 10) else 1.0)
        return train_step(x, y)
    return {"step": step, "snap": lambda: snap(model, opt)}



@case(n=16)
def loss_module_attributes_changed(C):
    rng = np.random.default_rng(131)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    ce = nn.CrossEntropyLoss(ignore_index=2)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = ce(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            ce.reduction = "sum"
        if i == 10:
            ce.label_smoothing = 0.2
        if i == 12:
            ce.ignore_index = 1
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def class_weights_array_mutated_in_place(C):
    rng = np.random.default_rng(132)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    w = np.array([1.0, 1.0, 1.0])
    ce = nn.CrossEntropyLoss(weight=w)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = ce(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            w[0] = 4.0                     # in place: class rebalancing
        if i == 10:
            w[...] *= 0.5
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def batchnorm_eps_momentum_and_stats_reset(C):
    rng = np.random.default_rng(133)
    model = nn.Sequential(nn.Linear(4, 8, rng=0), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3, rng=1))
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        bn = model[1]
        if i == 3:
            bn.eps = 1e-2
        if i == 10:
            bn.running_mean.data = np.zeros(8, np.float32)
            bn.running_var.data[:] = 1.0
            bn.momentum = 0.9
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def large_closed_over_dataset_indexed_by_argument(C):
    rng = np.random.default_rng(134)
    X = rng.standard_normal((1500, 4))
    Y = rng.integers(0, 3, 1500)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def train_step(idx):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(X[idx]), Y[idx])
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            X[:] = X * 2.0 + 1.0                 # augmentation in place on the data set
        return train_step(rng.integers(0, 1500, 16))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def large_closed_over_dataset_stats_computed_inside(C):
    rng = np.random.default_rng(135)
    X = rng.standard_normal((1500, 4))
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        mu, sd = X.mean(axis=0), X.std(axis=0)
        loss = nn.CrossEntropyLoss()(model((x - mu) / sd), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            X[...] *= 3.0
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def preallocated_batch_buffer_reused(C):
    rng = np.random.default_rng(136)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)
    xbuf = np.empty((16, 4))
    ybuf = np.empty(16, dtype=np.int64)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        x, y = batch(rng)
        xbuf[:] = x
        ybuf[:] = y
        return train_step(xbuf, ybuf)
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def closure_model_rebound_outside(C):
    rng = np.random.default_rng(137)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def rebind():
        nonlocal model, opt
        model = mlp(20)
        opt = tt.optim.Adam(model.parameters(), lr=0.01)

    def step(i):
        if i == 10:
            rebind()
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def trainer_attributes_swapped(C):
    rng = np.random.default_rng(138)

    class Trainer:
        def __init__(self):
            self.model = mlp(0)
            self.opt = tt.optim.SGD(self.model.parameters(), lr=0.1)
            self.loss_fn = nn.CrossEntropyLoss()
            self.clip = 1.0

        @C
        def step(self, x, y):
            self.opt.zero_grad()
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.opt.step()
            return loss

    t = Trainer()

    def step(i):
        if i == 3:
            t.clip = 0.01
        if i == 10:
            t.opt = tt.optim.AdamW(t.model.parameters(), lr=0.01)
            t.loss_fn = nn.CrossEntropyLoss(label_smoothing=0.3)
        return t.step(*batch(rng))
    return {"step": step, "snap": lambda: snap(t.model, t.opt)}


@case(n=12)
def backward_again_on_whole_step_loss(C):
    rng = np.random.default_rng(139)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        loss = train_step(*batch(rng))
        if i == 3:
            loss.backward()
        return loss
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def adam_step_count_edited_outside(C):
    rng = np.random.default_rng(140)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            for p in model.parameters():
                st = opt.state[p]
                st["step"] = 1 if isinstance(st["step"], int) else st["step"] * 0 + 1
                st["exp_avg"][...] = 0
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def previous_loss_as_float_argument(C):
    rng = np.random.default_rng(141)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    hist = {"prev": 10.0}

    @C
    def train_step(x, y, prev):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        w = tt.where(loss.detach() > prev, 2.0, 1.0)
        (loss * w).backward()
        opt.step()
        return loss

    def step(i):
        loss = train_step(*batch(rng), hist["prev"])
        hist["prev"] = loss.item()
        return loss
    return {"step": step, "snap": lambda: snap(model, opt, dict(hist))}


@case(n=16)
def bool_flag_argument_accumulate(C):
    rng = np.random.default_rng(142)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def train_step(x, y, do_step):
        loss = nn.CrossEntropyLoss()(model(x), y) / 2
        loss.backward()
        if do_step:
            opt.step()
            opt.zero_grad()
        return loss

    return {"step": lambda i: train_step(*batch(rng), i % 2 == 1), "snap": lambda: snap(model, opt)}


@case(n=16)
def inference_mode_decorated_eval(C):
    rng = np.random.default_rng(143)
    model = nn.Sequential(nn.Linear(4, 8, rng=0), nn.Dropout(0.5, rng=2), nn.Linear(8, 3, rng=1))
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    @C
    @tt.inference_mode()
    def predict(x):
        return tt.softmax(model(x), axis=-1)

    def step(i):
        loss = train_step(*batch(rng))
        if i == 3:
            model.eval()
        if i == 10:
            model.train()
        return loss, predict(rng.standard_normal((4, 4)))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def module_bias_set_to_none(C):
    rng = np.random.default_rng(144)
    model = Net(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 10:
            model.fc1.bias = None
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def np_float32_lr_argument_manual_update(C):
    rng = np.random.default_rng(145)
    W = tt.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)

    @C
    def step_fn(x, y, lr):
        loss = nn.functional.cross_entropy(x @ W, y)
        g = tt.grad(lambda w: nn.functional.cross_entropy(x @ w, y))(W)
        with tt.no_grad():
            W.sub_(lr * g)
        return loss.detach()

    def step(i):
        x, y = batch(rng)
        lr = np.float32(0.1) if i < 10 else 0.1
        return step_fn(x.astype(np.float32), y, lr)
    return {"step": step, "snap": lambda: snap(W)}



@case(n=20)
def guard_fails_midway_after_dropout_and_batchnorm(C):
    rng = np.random.default_rng(150)
    model = nn.Sequential(nn.Linear(4, 16, rng=0), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(16, 3, rng=1))
    opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = LR.StepLR(opt, 4, 0.7)
    gen = np.random.default_rng(11)

    @C
    def train_step(x, y):
        opt.zero_grad()
        x = x + 0.01 * tt.randn(*x.shape, rng=gen)
        logits = model(x)
        loss = nn.CrossEntropyLoss()(logits, y)
        if loss > 1.2:                                   # a guard after draws and buffer writes
            loss = loss + 0.1 * tt.mean(logits ** 2)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def step(i):
        x, y = batch(rng)
        if i in (3, 10, 11):
            x = x * 6
        return train_step(x, y)
    return {"step": step, "snap": lambda: snap(model, opt, sched, gen)}


@case(n=20)
def data_dependent_number_of_dropout_draws(C):
    rng = np.random.default_rng(151)
    block = nn.Sequential(nn.Linear(4, 4, rng=0), nn.Tanh(), nn.Dropout(0.2))
    head = nn.Linear(4, 2, rng=1)
    opt = tt.optim.Adam(list(block.parameters()) + list(head.parameters()), lr=0.01)

    @C
    def train_step(x, y):
        opt.zero_grad()
        h = x * 1.0
        n = 0
        while n < 4 and float(tt.mean(tt.abs(h.detach() if isinstance(h, tt.Tensor) else h))) > 0.3:
            h = block(h)
            n += 1
        loss = nn.MSELoss()(head(h), y)
        loss.backward()
        opt.step()
        return loss, n

    def step(i):
        scale = 0.2 if i % 3 == 0 else 2.0
        return train_step(rng.standard_normal((6, 4)) * scale, rng.standard_normal((6, 2)))
    return {"step": step, "snap": lambda: snap(block, head, opt)}


@case(n=16)
def int_of_tensor_as_loop_count(C):
    rng = np.random.default_rng(152)
    cell = nn.GRUCell(3, 5)
    head = nn.Linear(5, 1, rng=0)
    opt = tt.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.05)

    @C
    def train_step(xs, length, y):
        opt.zero_grad()
        h = tt.zeros((2, 5))
        for t in range(int(length.max())):
            h = cell(xs[t], h)
        loss = nn.MSELoss()(head(h), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        L = 3 + (i % 3)
        return train_step(rng.standard_normal((6, 2, 3)), np.array([L, L - 1]), rng.standard_normal((2, 1)))
    return {"step": step, "snap": lambda: snap(cell, head, opt)}


@case(n=16)
def branch_on_parameter_value_before_forward(C):
    rng = np.random.default_rng(153)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.8)

    @C
    def train_step(x, y):
        w = model[0].weight
        if (tt.abs(w.detach()) > 0.7).any():
            with tt.no_grad():
                w.clamp_(-0.7, 0.7)
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt)}


@case(n=12)
def train_epoch_loop_inside(C):
    rng = np.random.default_rng(154)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = LR.CosineAnnealingLR(opt, T_max=30)

    @C
    def train_epoch(xs, ys):
        losses = []
        for x, y in zip(xs, ys):
            opt.zero_grad()
            loss = nn.CrossEntropyLoss()(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.detach())
        return tt.stack(losses)

    def step(i):
        k = 3 if i != 10 else 2
        xs, ys = zip(*[batch(rng, n=8) for _ in range(k)])
        return train_epoch(list(xs), list(ys))
    return {"step": step, "snap": lambda: snap(model, opt, sched)}


@case(n=12, expect="refused")
def activation_capture_hook_writes_dict(C):
    rng = np.random.default_rng(155)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    feats = {}
    model[1].register_forward_hook(lambda m, a, out: feats.__setitem__("h", out.detach()))

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt, feats)}


@case(n=16)
def hooks_with_kwargs_and_prepend(C):
    rng = np.random.default_rng(156)
    model = Net(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    order = {"k": 1.0}

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            model.fc1.register_forward_hook(lambda m, a, kw, out: out + order["k"], with_kwargs=True)
        if i == 10:
            model.fc1.register_forward_hook(lambda m, a, out: out * 0.5, prepend=True)
        if i == 12:
            order["k"] = -1.0
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def optimizer_state_dict_returned_from_step(C):
    rng = np.random.default_rng(157)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)
    sched = LR.ExponentialLR(opt, 0.9)

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        sd = opt.state_dict()
        sched.step()
        return loss, sd

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt, sched)}


@case(n=16)
def grad_hook_on_parameter_clips_outside(C):
    rng = np.random.default_rng(158)
    model = mlp(0)
    opt = tt.optim.Adam(model.parameters(), lr=0.01)
    lim = {"c": 0.01}

    @C
    def train_step(x, y):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step(i):
        if i == 3:
            for p in model.parameters():
                p.register_hook(lambda g: tt.clip(g, -lim["c"], lim["c"]))
        if i == 10:
            lim["c"] = 0.001
        return train_step(*batch(rng))
    return {"step": step, "snap": lambda: snap(model, opt)}


@case(n=16)
def seq2seq_teacher_forcing_ratio_argument(C):
    rng = np.random.default_rng(159)
    emb = nn.Embedding(8, 4, rng=0)
    cell = nn.LSTMCell(4, 6)
    out = nn.Linear(6, 8, rng=1)
    params = list(emb.parameters()) + list(cell.parameters()) + list(out.parameters())
    opt = tt.optim.Adam(params, lr=0.01)

    @C
    def train_step(tgt, use_teacher):
        opt.zero_grad()
        h = tt.zeros((tgt.shape[0], 6))
        c = tt.zeros((tgt.shape[0], 6))
        inp = tgt[:, 0]
        loss = 0.0
        for t in range(1, tgt.shape[1]):
            h, c = cell(emb(inp), (h, c))
            logits = out(h)
            loss = loss + nn.CrossEntropyLoss()(logits, tgt[:, t])
            inp = tgt[:, t] if use_teacher[t] else tt.argmax(logits.detach(), axis=-1)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    def step(i):
        tgt = rng.integers(0, 8, (3, 5))
        return train_step(tgt, rng.random(5) < 0.5)
    return {"step": step, "snap": lambda: snap(emb, cell, out, opt)}


@case(n=16)
def l1_sparsity_penalty_weight_from_schedule_float(C):
    rng = np.random.default_rng(160)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    sched = LR.LinearLR(opt, start_factor=1.0, end_factor=0.1, total_iters=10)

    @C
    def train_step(x, y, lam):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        l1 = sum(tt.sum(tt.abs(p)) for p in model.parameters())
        total = loss + lam * l1
        total.backward()
        opt.step()
        sched.step()
        return loss, l1.detach()

    return {"step": lambda i: train_step(*batch(rng), 1e-3 * min(1.0, i / 5)),
            "snap": lambda: snap(model, opt, sched)}



@case(n=12)
def tensor_method_on_array_argument(C):
    rng = np.random.default_rng(161)
    model = mlp(0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)

    @C
    def train_step(x, y):
        opt.zero_grad()
        x = x.detach()                      # an ndarray has no .detach(): eagerly an AttributeError
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return {"step": lambda i: train_step(*batch(rng)), "snap": lambda: snap(model, opt)}


# ----------------------------------------------------------------------------- what each case gave

OUTCOMES = {
    "optimizer_state_dict_returned_from_step": ("refused", ""),   # opt.state_dict() inside: refused
    "nonlocal_step_counter_rebinding": ("refused", ""),
    "skip_step_on_large_grad_norm_after_backward": ("refused", ""),
    "load_state_dict_inside_from_argument": ("refused", ""),
    "jvp_through_compiled_result": (
        "silent",
        "out = tt.compile(lambda x: tt.sum(tt.tanh(x @ W)))(x); out.jvp({W: t}) differs from eager in the "
        "last bit (-0.4676868672476279 vs -0.467686867247628); the guide says 'to rounding'"),
    "tensor_method_on_array_argument": (
        "silent",
        "x.detach() on an ndarray argument: eager raises AttributeError, the compiled function runs "
        "(inside it the argument is a Tensor) and trains"),
}
for _name, (_kind, _reason) in OUTCOMES.items():
    CASES[_name] = CASES[_name][:2] + (_kind, _reason)


# ----------------------------------------------------------------------------- the tests

def _expected(name):
    return CASES[name][2], CASES[name][3]


def _params():
    out = []
    for name, (_, _, expect, reason) in CASES.items():
        marks = []
        if expect not in ("equal", "refused"):
            marks.append(pytest.mark.xfail(strict=True, reason=f"{expect}: {reason}"))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("name", _params())
def test_case(name):
    build, n, expect, _ = CASES[name]
    got, detail = outcome(build, n)
    want = "equal" if expect not in ("equal", "refused") else expect
    assert got == want, f"{name}: {got}: {detail}"


# ----------------------------------------------------------------------------- explaining itself

def _doc_step():
    model = nn.Sequential(nn.Linear(4, 8, rng=0), nn.Tanh(), nn.Linear(8, 3, rng=1))
    opt = tt.optim.Adam(model.parameters(), lr=0.01)
    sched = LR.StepLR(opt, step_size=10, gamma=0.5)
    loss_fn = nn.CrossEntropyLoss()

    @tt.compile
    def train_step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss
    return model, opt, sched, train_step


def test_one_program_for_42_whole_steps():
    _, _, _, train_step = _doc_step()
    rng = np.random.default_rng(0)
    for _ in range(42):
        train_step(rng.standard_normal((16, 4)), rng.integers(0, 3, 16))
    assert len(train_step.recompiles) == 1
    assert train_step.traces == 1


def test_recompiles_names_the_change():
    model, opt, _, train_step = _doc_step()
    rng = np.random.default_rng(0)
    for i in range(12):
        if i == 3:
            model.eval()
        if i == 10:
            model[1].training = True
            model[2].weight.requires_grad_(False)
        train_step(rng.standard_normal((16, 4)), rng.integers(0, 3, 16))
    assert len(train_step.recompiles) == 3
    assert all(isinstance(r, str) and r for r in train_step.recompiles)


def test_recompile_limit_warns_once_then_eager_numbers():
    model = nn.Linear(3, 2, rng=0, dtype=np.float64)

    def f(x, k):
        return tt.sum(model(x)[:, : (k % 2) + 1]) * float(k)
    cf = tt.compile(f)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for k in range(20):
            x = rng.standard_normal((4, 3))
            with tt.no_grad():
                a, b = cf(x, k), f(x, k)
            assert canon(a) == canon(b), k
    msgs = [str(m.message) for m in w if "compile" in str(m.message).lower()]
    assert len(msgs) == 1, msgs
    assert cf.traces <= 9


def test_disable_switch_mid_run_equal():
    def build(C):
        model = mlp(0)
        opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        rng = np.random.default_rng(3)

        @C
        def train_step(x, y):
            opt.zero_grad()
            loss = nn.CrossEntropyLoss()(model(x), y)
            loss.backward()
            opt.step()
            return loss

        def step(i):
            if i == 3:
                tt.compile.disable()
            if i == 10:
                tt.compile.disable(False)
            return train_step(*batch(rng))
        return {"step": step, "snap": lambda: snap(model, opt)}
    try:
        got, detail = outcome(build, 16)
    finally:
        tt.compile.disable(False)
    assert got == "equal", detail


def test_disable_environment_variable():
    code = (
        "import numpy as np, tinytensor as tt\n"
        "f = tt.compile(lambda x: tt.tanh(x) * 2)\n"
        "for _ in range(3): f(np.ones(3))\n"
        "print(f.traces)\n"
    )
    env = dict(os.environ, TINYTENSOR_DISABLE_COMPILE="1", PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"
