"""Round 24a (fresh user): long-running training scripts written the PyTorch way.

Every case builds the same set-up twice with the same seeds, runs one copy eagerly and one
through ``tt.compile`` (12 calls; 42 for the long ones), changes things outside the function
before the 3rd, 10th and 40th call, and after every call compares bit for bit the output, all
earlier outputs, the arguments, the model (parameters, ``.grad``, buffers, modes), optimizer
state and hyperparameters, scheduler state, references to ``.grad``/``.data`` arrays held from
before each call, and the global generator state. A refusal passes only where the docs list it.

274 cases: 243 equal (a few are documented refusals), 31 strict xfails in four families.

Families found (each xfail's reason says what differs):

1. SILENT, in-place NumPy ufunc on ``p.grad`` with a number-argument operand (13 cases):
   ``p.grad /= scale`` (loss scaling with ``scale`` passed as a float/np.float32 argument),
   ``p.grad *= 1.0 / s``, ``p.grad *= s``, ``p.grad -= s * c``: the first call is right, every
   replay of that program leaves parameters different from eager's (the in-place op is not
   replayed with the call's number). E.g. ``test_case[loss_scaling_grad_div]``,
   ``test_inplace_number_operand[grad-idiv-arg_const]`` (scale = 8.0 on every call, differs
   at call 2). The same op with the number from a closure or a global, or with an array
   operand (``p.grad += (s * c) * p.data``, ``p.data -= s * c * p.grad``), is equal.
2. FALSE REFUSAL, ``p.data *= 1 - s * wd`` / ``p.data += s * c`` with ``s`` a number argument
   (6 cases, hand-written decoupled weight decay): refused as a ``t.data = ...`` rebinding,
   though the docs list in-place writes into a parameter's memory as program lines (and the
   same line with a closed-over number is accepted).
   E.g. ``test_inplace_number_operand[data-imul_decay-arg_const]``.
3. FALSE REFUSAL, ``p.data[...] = p.data * (1 - s * c)`` (4 cases, every source of ``s``):
   refused as a NumPy index write of traced data. E.g.
   ``test_inplace_number_operand[data-ellipsis_decay-closure]``.
4. FALSE REFUSAL, index writes into ``.grad``/``.data`` after ``backward()`` (8 cases):
   ``p.grad[0] = 0.0``, ``p.grad[:, 1] = 0``, ``p.grad[...] = 0.0``, ``p.grad[1] *= .5``,
   ``p.grad[:2] = p.grad[:2] * .5``, ``p.data[0] = 0``, ``p.data[...] = np.clip(p.data, ..)``,
   all refused ("writing in place into a value computed from traced data"), though the docs
   list ``p.grad[...] = ...`` as a line (``p.grad[...] = p.grad / s`` is accepted).
   E.g. ``test_index_write_after_backward[grad_ellipsis_zero]``, ``test_case[grad_index_write]``.

Tried and equal: a whole step (zero_grad/forward/backward/step/scheduler) for 8 optimizer
configurations (SGD plain, momentum, nesterov + weight decay, dampening; Adam, Adam amsgrad +
L2, AdamW, centered RMSprop with momentum) x 10 schedules (none, StepLR, ExponentialLR,
CosineAnnealingLR, LinearLR, MultiStepLR, LambdaLR, OneCycleLR, SequentialLR warmup+cosine,
ChainedScheduler) stepped inside, and 10 (AdamW) stepped outside, over 42 calls with the learning rate
halved by hand outside and the batch size changed (``test_grid_long``); LambdaLR whose lambda
reads a global / a mutated list / is replaced; StepLR gamma and step_size, CosineAnnealing T_max
and last_epoch reset, OneCycle max_lr/max_momentum changed outside; scheduler, optimizer and
model ``state_dict``/``load_state_dict`` mid-run (also with another lr and momentum);
ReduceLROnPlateau stepped outside from the returned loss and inside with the metric passed as
a float argument; ``get_last_lr()`` read before ``sched.step()`` and returned; manual SGD with
``lr`` read from ``param_groups`` and a schedule stepped outside; warmup written into
``param_groups`` inside from a float, np.float32 or int argument (also per-group scales from a
closure) and outside on every call; every SGD/Adam/AdamW/RMSprop hyperparameter (momentum,
nesterov, dampening, weight_decay, betas, eps, amsgrad, alpha, centered) changed outside;
``add_param_group`` / ``del param_groups[0]`` / params swapped between groups mid-run;
``zero_grad(set_to_none=True/False)`` with layers frozen and unfrozen by ``requires_grad_``
for four optimizers; ``Module.zero_grad(set_to_none=False)`` with the ``.grad`` array returned;
gradient accumulation with a bool flag, an int counter argument, a global counter, or the step
outside; manual SGD in three spellings and four lr types; ``clip_grad_norm_`` (2, 1, inf) with
the max norm an argument, ``clip_grad_value_``, the clip value in a global changed outside;
gradient noise from the global generator; tensor hooks on parameters and module forward /
pre-hooks added and removed outside, a forward hook reading a list, a hook on an intermediate
inside; weight tying (tied, untied by a new Parameter, re-tied; tied by sharing ``.data``);
``train()``/``eval()`` outside and ``train()`` inside, Dropout p and BatchNorm momentum / eps
changed, running statistics reset, cumulative BatchNorm; validation in ``eval()`` under
``no_grad`` inside the step; EMA inside (``.data`` ops, ``mul_/add_``, decay argument) and SWA
outside; ``model.to(float64)`` and back mid-run for five optimizers; a submodule, a Parameter
and the optimizer replaced mid-run; ``.data`` rebound and made Fortran-ordered outside;
temperatures and decay exponents as numbers; kwargs and bool flags; label dtype changes and
one-hot labels; Tensor vs array arguments; ``tt.compile`` as a decorator, on a bound method
(attributes changed outside), as a method decorator with two instances, on a Module (training
outside, eval/to(float64)/freeze changes), on the forward loss as one tape entry;
``tt.compile.disable()`` switched mid-run; ``.recompiles`` / ``.traces`` for shape and dtype
changes, a number used in a branch, and one program for a cosine lr argument. Documented
refusals seen: a value read from ``param_groups`` after ``sched.step()`` inside (OneCycle's
betas), ``sched.step(loss)`` with a metric computed inside, ``.item()``/``float()`` after
``backward()``, a list appended and an attribute counter inside, an argument Tensor's
``.grad`` read inside. ``p.grad = None`` after the step inside runs and is equal.
"""

import math
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.optim import lr_scheduler as LS

CHANGE_AT = (2, 9, 39)
XF_INPLACE = {}


# --------------------------------------------------------------------------- snapshots


def snap(o, depth=0):
    if depth > 10:
        return ("DEEP",)
    if o is None or isinstance(o, (bool, str)):
        return (type(o).__name__, o)
    if isinstance(o, float):
        return ("float", o.hex() if o == o else f"nan{math.copysign(1.0, o)}")
    if isinstance(o, int):
        return (type(o).__name__, int(o))
    if isinstance(o, np.generic):
        return ("np", type(o).__name__, o.tobytes())
    if isinstance(o, np.ndarray):
        return ("A", o.dtype.str, o.shape, o.tobytes())
    if isinstance(o, tt.Tensor):
        return ("T", type(o).__name__, snap(o.data, depth + 1), bool(o.requires_grad),
                snap(o.grad, depth + 1))
    if isinstance(o, nn.Module):
        return ("M", type(o).__name__, [mm.training for mm in o.modules()],
                [(n, snap(p, depth + 1)) for n, p in o.named_parameters()],
                [(n, snap(b, depth + 1)) for n, b in o.named_buffers()])
    if isinstance(o, tt.optim.Optimizer):
        groups = [[(k, len(v) if k == "params" else snap(v, depth + 1)) for k, v in g.items()]
                  for g in o.param_groups]
        return ("OPT", type(o).__name__, groups, snap(o.state_dict()["state"], depth + 1))
    if isinstance(o, (LS.LRScheduler, LS.ReduceLROnPlateau)):
        return ("SCHED", type(o).__name__,
                snap({k: v for k, v in vars(o).items() if k != "optimizer"}, depth + 1))
    if isinstance(o, np.random.Generator):
        return ("GEN", snap(o.bit_generator.state, depth + 1))
    if isinstance(o, dict):
        return ("D", type(o).__name__, [(repr(k), snap(v, depth + 1)) for k, v in o.items()])
    if isinstance(o, (list, tuple)):
        return (type(o).__name__, [snap(v, depth + 1) for v in o])
    if callable(o):
        return ("F",)
    if hasattr(o, "__dict__"):
        return ("O", type(o).__name__, snap(vars(o), depth + 1))
    return ("R", repr(o))


def _eager(f=None, **kw):
    return f if f is not None else (lambda g: g)


class Refused(Exception):
    pass


def run(build, n, compiled):
    tt.manual_seed(1234)
    C = tt.compile if compiled else _eager
    env = build(C)
    fn = env["fn"]
    outs, recs, held = [], [], []
    for i in range(n):
        if i in CHANGE_AT and env.get("change"):
            env["change"](i)
        if env.get("pre"):
            env["pre"](i, outs)
        args = env["args"](i)
        kwargs = {}
        if isinstance(args, dict):
            args, kwargs = (), args
        for p in env.get("params", lambda: [])():
            held.append(p.grad)
            held.append(p.data)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001
            msg = str(e)
            if compiled and isinstance(e, RuntimeError) and "tt.compile" in msg:
                recs.append(("REFUSED", msg.splitlines()[0][:200]))
            else:
                recs.append(("ERR", type(e).__name__))
            break
        outs.append(out)
        recs.append((i, snap(out), snap(outs), snap(args), snap(kwargs),
                     snap(env["state"]()), snap(held), snap(tt.get_rng_state())))
    if env.get("finally"):
        env["finally"]()
    return recs


def check(build, n=12, refuse_ok=False):
    eager = run(build, n, False)
    comp = run(build, n, True)
    for k, (a, b) in enumerate(zip(eager, comp)):
        if b[0] == "REFUSED":
            if refuse_ok:
                return
            raise AssertionError(f"false refusal at call {k + 1}: {b[1]}")
        if a != b:
            names = ["call", "out", "earlier outs", "args", "kwargs", "state", "held grads/data",
                     "global rng"]
            if a[0] == "ERR" or b[0] == "ERR":
                raise AssertionError(f"call {k + 1}: eager {a[:2]!r} compiled {b[:2]!r}")
            which = [names[j] for j in range(len(a)) if a[j] != b[j]]
            raise AssertionError(f"call {k + 1} differs in {which}")
    assert len(eager) == len(comp), (len(eager), len(comp))


# --------------------------------------------------------------------------- builders


def mlp(seed=0, dtype=np.float32, drop=None, bn=False, hidden=8):
    layers = [nn.Linear(4, hidden, rng=seed, dtype=dtype)]
    if bn:
        layers.append(nn.BatchNorm1d(hidden))
    layers.append(nn.Tanh())
    if drop is not None:
        layers.append(nn.Dropout(0.3, rng=drop))
    layers.append(nn.Linear(hidden, 3, rng=seed + 1, dtype=dtype))
    return nn.Sequential(*layers)


def data(i, b=16, dtype=np.float32):
    r = np.random.default_rng(100 + i)
    return r.standard_normal((b, 4)).astype(dtype), r.integers(0, 3, b)


def bsz(i):
    return 16 if i < 9 else (8 if i < 39 else 5)


OPTS = {
    "sgd": lambda p: tt.optim.SGD(p, lr=0.1),
    "sgd_mom": lambda p: tt.optim.SGD(p, lr=0.05, momentum=0.9),
    "sgd_nest_wd": lambda p: tt.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                          weight_decay=1e-3),
    "sgd_damp": lambda p: tt.optim.SGD(p, lr=0.05, momentum=0.8, dampening=0.1),
    "adam": lambda p: tt.optim.Adam(p, lr=0.01),
    "adam_ams_wd": lambda p: tt.optim.Adam(p, lr=0.01, amsgrad=True, weight_decay=1e-2),
    "adamw": lambda p: tt.optim.AdamW(p, lr=0.01),
    "rmsprop_c": lambda p: tt.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
}

SCHEDS = {
    "none": lambda o: None,
    "step": lambda o: LS.StepLR(o, step_size=3, gamma=0.5),
    "exp": lambda o: LS.ExponentialLR(o, gamma=0.9),
    "cos": lambda o: LS.CosineAnnealingLR(o, T_max=10, eta_min=1e-4),
    "linear": lambda o: LS.LinearLR(o, start_factor=0.25, total_iters=6),
    "multistep": lambda o: LS.MultiStepLR(o, milestones=[2, 5, 11], gamma=0.3),
    "lambda": lambda o: LS.LambdaLR(o, lambda e: 1.0 / (1.0 + e)),
    "onecycle": lambda o: LS.OneCycleLR(o, max_lr=0.1, total_steps=60),
    "sequential": lambda o: LS.SequentialLR(
        o, [LS.LinearLR(o, start_factor=0.1, total_iters=4), LS.CosineAnnealingLR(o, T_max=8)],
        milestones=[4]),
    "chained": lambda o: LS.ChainedScheduler([LS.StepLR(o, 4, 0.5), LS.ExponentialLR(o, 0.95)]),
}


def whole_step(oname, sname, where, C):
    m = mlp()
    opt = OPTS[oname](m.parameters())
    sched = SCHEDS[sname](opt)
    lossf = nn.CrossEntropyLoss()

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        if where == "inside" and sched is not None:
            sched.step()
        return loss

    def pre(i, outs):
        if where == "outside" and sched is not None and i > 0:
            sched.step()

    def change(i):
        for g in opt.param_groups:
            g["lr"] = g["lr"] * 0.5

    return dict(fn=step, args=lambda i: data(i, bsz(i)), change=change, pre=pre,
                state=lambda: (m, opt, sched), params=lambda: list(m.parameters()))


GRID = [(o, s, "inside") for o in OPTS for s in SCHEDS]
GRID += [(o, s, "outside") for o in ("adamw",) for s in SCHEDS]


@pytest.mark.parametrize("oname,sname,where", GRID)
def test_grid_long(oname, sname, where):
    check(lambda C: whole_step(oname, sname, where, C), n=42)


# --------------------------------------------------------------------------- targeted cases

CASES = {}


def case(n=12, refuse_ok=False, xfail=None):
    def deco(f):
        CASES[f.__name__] = (f, n, refuse_ok, xfail)
        return f
    return deco


def std(m, opt, sched=None, **extra):
    d = dict(state=lambda: (m, opt, sched), params=lambda: list(m.parameters()),
             args=lambda i: data(i))
    d.update(extra)
    return d


def _setup(oname="sgd_mom", sname="none", **kw):
    m = mlp(**kw)
    opt = OPTS[oname](m.parameters())
    return m, opt, SCHEDS[sname](opt), nn.CrossEntropyLoss()


# ---- schedulers changed from outside

WARM = [5.0]
WARM_G = 5.0


@case(n=42)
def c_lambda_reads_global_changed(C):
    m, opt, _, lossf = _setup()
    sched = LS.LambdaLR(opt, lambda e: min(1.0, (e + 1) / WARM_G))

    @C
    def step(x, y):
        opt.zero_grad()
        lossf(m(x), y).backward()
        opt.step()
        sched.step()

    def change(i):
        global WARM_G
        WARM_G = {2: 2.0, 9: 9.0, 39: 1.0}[i]

    def fin():
        global WARM_G
        WARM_G = 5.0
    return std(m, opt, sched, fn=step, change=change, **{"finally": fin})


@case(n=42)
def c_lambda_reads_list_mutated(C):
    m, opt, _, lossf = _setup("adam")
    cfg = [5.0]
    sched = LS.LambdaLR(opt, lambda e: min(1.0, (e + 1) / cfg[0]))

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def change(i):
        cfg[0] = {2: 2.0, 9: 20.0, 39: 1.0}[i]
    return std(m, opt, sched, fn=step, change=change)


@case(n=42)
def c_lambda_replaced_outside(C):
    m, opt, sched, lossf = _setup("sgd_mom", "lambda")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def change(i):
        sched.lr_lambdas[0] = (lambda k: lambda e: 0.5 ** (e // k))(i + 1)
    return std(m, opt, sched, fn=step, change=change)


@case(n=42)
def c_step_gamma_changed_outside(C):
    m, opt, sched, lossf = _setup("sgd_mom", "step")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def change(i):
        sched.gamma = {2: 0.9, 9: 0.2, 39: 1.5}[i]
        sched.step_size = {2: 2, 9: 5, 39: 1}[i]
    return std(m, opt, sched, fn=step, change=change)


@case(n=42)
def c_cos_tmax_and_last_epoch_reset(C):
    m, opt, sched, lossf = _setup("adamw", "cos")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def change(i):
        sched.T_max = {2: 4, 9: 30, 39: 3}[i]
        if i == 9:
            sched.last_epoch = 0
            for g in opt.param_groups:
                g["lr"] = g["initial_lr"]
    return std(m, opt, sched, fn=step, change=change)


@case(n=42)
def c_sched_base_lrs_changed(C):
    m, opt, sched, lossf = _setup("sgd_mom", "onecycle")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def change(i):
        for g in opt.param_groups:
            g["max_lr"] = g["max_lr"] * 2
            g["max_momentum"] = 0.99
    return std(m, opt, sched, fn=step, change=change)


@case(n=42, refuse_ok=True)
def c_onecycle_adam_betas(C):
    m, opt, sched, lossf = _setup("adam", "onecycle")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss, opt.param_groups[0]["betas"][1]
    return std(m, opt, sched, fn=step)


@case(n=42)
def c_sched_state_dict_roundtrip_outside(C):
    m, opt, sched, lossf = _setup("adam", "cos")
    saved = {}

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def change(i):
        if i == 2:
            saved["s"] = sched.state_dict()
            saved["o"] = opt.state_dict()
            saved["m"] = m.state_dict()
        else:
            sched.load_state_dict(saved["s"])
            opt.load_state_dict(saved["o"])
            m.load_state_dict(saved["m"])
    return std(m, opt, sched, fn=step, change=change)


@case(n=42)
def c_opt_load_state_dict_other_lr(C):
    m, opt, sched, lossf = _setup("sgd_mom", "step")
    saved = {}

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def change(i):
        if i == 2:
            saved["o"] = opt.state_dict()
        else:
            sd = saved["o"]
            sd["param_groups"][0]["lr"] = 0.3
            sd["param_groups"][0]["momentum"] = 0.5
            opt.load_state_dict(sd)
    return std(m, opt, sched, fn=step, change=change)


@case(n=42)
def c_plateau_outside_from_returned_loss(C):
    m, opt, _, lossf = _setup("sgd_mom")
    sched = LS.ReduceLROnPlateau(opt, factor=0.5, patience=1, threshold=0.5)

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def pre(i, outs):
        if outs:
            sched.step(float(outs[-1]))
    return std(m, opt, sched, fn=step, pre=pre)


@case(n=42)
def c_plateau_inside_metric_argument(C):
    m, opt, _, lossf = _setup("sgd_mom")
    sched = LS.ReduceLROnPlateau(opt, factor=0.5, patience=1, threshold=0.5)

    @C
    def step(x, y, metric):
        sched.step(metric)
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def args(i):
        return data(i) + (float(3.0 / (1 + (i % 7))),)
    return std(m, opt, sched, fn=step, args=args)


@case(n=12, refuse_ok=True)
def c_plateau_inside_metric_computed(C):
    m, opt, _, lossf = _setup("sgd_mom")
    sched = LS.ReduceLROnPlateau(opt, factor=0.5, patience=1)

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step(loss)
        return loss
    return std(m, opt, sched, fn=step)


@case(n=42)
def c_get_last_lr_before_step_returned(C):
    m, opt, sched, lossf = _setup("sgd_mom", "cos")

    @C
    def step(x, y):
        lr = sched.get_last_lr()[0]
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss, lr
    return std(m, opt, sched, fn=step)


@case(n=12, refuse_ok=True)
def c_get_last_lr_after_step_refused(C):
    m, opt, sched, lossf = _setup("sgd_mom", "cos")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss * sched.get_last_lr()[0]
    return std(m, opt, sched, fn=step)


@case(n=42)
def c_manual_sgd_lr_from_group_sched_outside(C):
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.1)
    sched = LS.CosineAnnealingLR(opt, T_max=10)
    lossf = nn.CrossEntropyLoss()

    @C
    def step(x, y):
        lr = opt.param_groups[0]["lr"]
        m.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        for p in m.parameters():
            p.data -= lr * p.grad
        return loss

    def pre(i, outs):
        if i:
            sched.step()
    return std(m, opt, sched, fn=step, pre=pre)


# ---- learning rates and hyperparameters written by hand


@case(n=42)
def c_warmup_inside_from_float_arg(C):
    m, opt, _, lossf = _setup("adamw")

    @C
    def step(x, y, lr):
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    return std(m, opt, fn=step, args=lambda i: data(i) + (0.01 * min(1.0, (i + 1) / 10),))


@case(n=42)
def c_warmup_inside_scaled_per_group(C):
    m = mlp()
    opt = tt.optim.SGD([{"params": m[0].parameters()},
                        {"params": m[2].parameters()}], lr=0.1, momentum=0.9)
    scales = [1.0, 0.1]
    lossf = nn.CrossEntropyLoss()

    @C
    def step(x, y, lr):
        for g, sc in zip(opt.param_groups, scales):
            g["lr"] = lr * sc
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        scales[1] = {2: 0.5, 9: 2.0, 39: 0.0}[i]
    return std(m, opt, fn=step, change=change,
               args=lambda i: data(i) + (0.1 * min(1.0, (i + 1) / 10),))


@case(n=42)
def c_warmup_inside_from_int_iteration(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y, it):
        for g in opt.param_groups:
            g["lr"] = 0.1 * min(1.0, (it + 1) / 5)
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    return std(m, opt, fn=step, args=lambda i: data(i) + (i,))


@case(n=42)
def c_warmup_inside_int_arg_arith_only(C):
    m, opt, _, lossf = _setup("adam")

    @C
    def step(x, y, it):
        for g in opt.param_groups:
            g["lr"] = 0.01 * (1 - 0.9 ** (it + 1))
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    return std(m, opt, fn=step, args=lambda i: data(i) + (i,))


@case(n=42)
def c_warmup_outside_every_call(C):
    m, opt, _, lossf = _setup("adam")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def pre(i, outs):
        for g in opt.param_groups:
            g["lr"] = 0.01 * min(1.0, (i + 1) / 6)
    return std(m, opt, fn=step, pre=pre)


@case(n=42)
def c_lr_arg_then_sched_inside(C):
    m, opt, sched, lossf = _setup("sgd_mom", "exp")

    @C
    def step(x, y, lr):
        opt.param_groups[0]["lr"] = lr
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    return std(m, opt, sched, fn=step, args=lambda i: data(i) + (0.05 / (1 + i),))


@case(n=42)
def c_lr_np_float32_arg_group(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y, lr):
        opt.param_groups[0]["lr"] = lr
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    return std(m, opt, fn=step, args=lambda i: data(i) + (np.float32(0.05 / (1 + i)),))


@pytest.mark.parametrize("key,vals", [
    ("weight_decay", (0.01, 0.0, 0.1)),
    ("momentum", (0.5, 0.0, 0.99)),
    ("nesterov", (True, False, True)),
    ("dampening", (0.5, 0.0, 0.2)),
])
def test_sgd_hyper_changed_outside(key, vals):
    def build(C):
        m, opt, _, lossf = _setup("sgd_mom")

        @C
        def step(x, y):
            opt.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            opt.step()
            return loss

        def change(i):
            opt.param_groups[0][key] = vals[CHANGE_AT.index(i)]
        return std(m, opt, fn=step, change=change)
    check(build, n=42)


@pytest.mark.parametrize("oname,key,vals", [
    ("adam", "betas", ((0.5, 0.9), (0.9, 0.999), (0.0, 0.5))),
    ("adam", "eps", (1e-3, 1e-8, 1.0)),
    ("adam", "amsgrad", (True, False, True)),
    ("adam", "weight_decay", (0.1, 0.0, 1.0)),
    ("adamw", "weight_decay", (0.1, 0.0, 1.0)),
    ("rmsprop_c", "alpha", (0.5, 0.9, 0.0)),
    ("rmsprop_c", "centered", (False, True, False)),
    ("rmsprop_c", "momentum", (0.0, 0.9, 0.3)),
])
def test_adaptive_hyper_changed_outside(oname, key, vals):
    def build(C):
        m, opt, _, lossf = _setup(oname)

        @C
        def step(x, y):
            opt.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            opt.step()
            return loss

        def change(i):
            opt.param_groups[0][key] = vals[CHANGE_AT.index(i)]
        return std(m, opt, fn=step, change=change)
    check(build, n=42)


@case(n=42)
def c_add_param_group_midrun(C):
    m = mlp()
    opt = tt.optim.SGD(m[0].parameters(), lr=0.1, momentum=0.9)
    lossf = nn.CrossEntropyLoss()

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        if i == 2:
            opt.add_param_group({"params": list(m[2].parameters()), "lr": 0.01})
        elif i == 9:
            del opt.param_groups[0]
        else:
            opt.param_groups[0]["params"].append(m[0].weight)
    return std(m, opt, fn=step, change=change)


@case(n=42)
def c_add_param_group_adam_midrun(C):
    m = mlp()
    opt = tt.optim.Adam(m[2].parameters(), lr=0.01)
    sched = LS.StepLR(opt, 3, 0.5)
    lossf = nn.CrossEntropyLoss()

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def change(i):
        if i == 2:
            opt.add_param_group({"params": list(m[0].parameters()), "lr": 0.05})
            sched.base_lrs.append(0.05)
    return std(m, opt, sched, fn=step, change=change)


@case(n=42)
def c_param_groups_params_swapped(C):
    m = mlp()
    opt = tt.optim.SGD([{"params": [m[0].weight]}, {"params": [m[2].weight], "lr": 0.01}],
                       lr=0.1, momentum=0.9)
    lossf = nn.CrossEntropyLoss()

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        g0, g1 = opt.param_groups
        g0["params"], g1["params"] = g1["params"], g0["params"]
    return std(m, opt, fn=step, change=change)


# ---- zero_grad, accumulation, .grad inside


@pytest.mark.parametrize("oname", ["sgd_mom", "adam", "rmsprop_c", "sgd_nest_wd"])
@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_modes_with_freeze(oname, set_to_none):
    def build(C):
        m, opt, _, lossf = _setup(oname)

        @C
        def step(x, y):
            opt.zero_grad(set_to_none=set_to_none)
            loss = lossf(m(x), y)
            loss.backward()
            opt.step()
            return loss

        def change(i):
            m[0].weight.requires_grad_(i != 2 and i != 39)
            m[2].bias.requires_grad_(i != 9)
        return std(m, opt, fn=step, change=change)
    check(build, n=42)


@case(n=12)
def c_module_zero_grad_keep_arrays(C):
    m, opt, _, lossf = _setup("adam")

    @C
    def step(x, y):
        m.zero_grad(set_to_none=False)
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss, m[0].weight.grad
    return std(m, opt, fn=step)


@case(n=12)
def c_return_grad_array_set_to_none(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss, m[2].bias.grad, m[0].weight.data
    return std(m, opt, fn=step)


@case(n=12)
def c_return_param_tensor(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return m[2].bias
    return std(m, opt, fn=step)


@case(n=42)
def c_accum_bool_flag(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y, do_step):
        loss = lossf(m(x), y) / 4
        loss.backward()
        if do_step:
            opt.step()
            opt.zero_grad()
        return loss

    return std(m, opt, fn=step, args=lambda i: data(i) + ((i + 1) % 4 == 0,))


@case(n=42)
def c_accum_int_counter_arg(C):
    m, opt, _, lossf = _setup("adam")

    @C
    def step(x, y, k):
        loss = lossf(m(x), y) / 3
        loss.backward()
        if (k + 1) % 3 == 0:
            opt.step()
            opt.zero_grad(set_to_none=False)
        return loss

    return std(m, opt, fn=step, args=lambda i: data(i) + (i,))


@case(n=42)
def c_accum_step_outside(C):
    m, opt, sched, lossf = _setup("adamw", "cos")

    @C
    def fwd_bwd(x, y, scale):
        loss = lossf(m(x), y) * scale
        loss.backward()
        return loss

    def pre(i, outs):
        if i and i % 3 == 0:
            opt.step()
            sched.step()
            opt.zero_grad()
    return std(m, opt, sched, fn=fwd_bwd, pre=pre, args=lambda i: data(i) + (1.0 / 3,))


ACC = {"n": 0}


@case(n=42)
def c_accum_global_counter_outside(C):
    m, opt, _, lossf = _setup("sgd_mom")
    ACC["n"] = 0

    @C
    def step(x, y):
        loss = lossf(m(x), y)
        loss.backward()
        if ACC["n"] % 4 == 3:
            nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
            opt.zero_grad()
        return loss

    def pre(i, outs):
        ACC["n"] = i
    return std(m, opt, fn=step, pre=pre)


@pytest.mark.parametrize("form", ["data_isub", "no_grad_isub", "sub_"])
def test_manual_sgd_float_lr(form):
    def build(C):
        m = mlp()
        lossf = nn.CrossEntropyLoss()

        @C
        def step(x, y, lr):
            m.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            for p in m.parameters():
                if form == "data_isub":
                    p.data -= lr * p.grad
                elif form == "no_grad_isub":
                    with tt.no_grad():
                        p -= lr * p.grad
                else:
                    with tt.no_grad():
                        p.sub_(lr * p.grad)
            return loss

        def change(i):
            m[0].weight.requires_grad_(i != 9)
        return dict(fn=step, args=lambda i: data(i) + (0.1 * 0.95 ** i,), change=change,
                    state=lambda: m, params=lambda: list(m.parameters()))
    check(build, n=42)


@pytest.mark.parametrize("lrtype", [float, np.float32, np.float64, int])
def test_manual_sgd_lr_types(lrtype):
    def build(C):
        m = mlp()
        lossf = nn.CrossEntropyLoss()

        @C
        def step(x, y, lr):
            m.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            for p in m.parameters():
                p.data -= lr * p.grad * 0.01
            return loss, lr * loss

        return dict(fn=step, args=lambda i: data(i) + (lrtype(1 + i % 3),),
                    state=lambda: m, params=lambda: list(m.parameters()))
    check(build, n=12)


@case(n=42, xfail="INPLACE_NUM")
def c_loss_scaling_grad_div(C):
    m, opt, _, lossf = _setup("adam")

    @C
    def step(x, y, scale):
        opt.zero_grad()
        loss = lossf(m(x), y)
        (loss * scale).backward()
        for p in m.parameters():
            p.grad /= scale
        opt.step()
        return loss

    return std(m, opt, fn=step, args=lambda i: data(i) + (2.0 ** (i % 5 + 3),))


@case(n=42, xfail="GRAD_INDEX")
def c_grad_index_write(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        m[0].weight.grad[0] = 0.0
        opt.step()
        return loss
    return std(m, opt, fn=step)


@pytest.mark.parametrize("norm_type", [2, 1, float("inf")])
def test_clip_norm_arg_returned(norm_type):
    def build(C):
        m, opt, sched, lossf = _setup("sgd_mom", "step")

        @C
        def step(x, y, max_norm):
            opt.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            total = nn.utils.clip_grad_norm_(m.parameters(), max_norm, norm_type=norm_type)
            opt.step()
            sched.step()
            return loss, total

        return std(m, opt, sched, fn=step, args=lambda i: data(i) + (0.05 * (1 + i % 4),))
    check(build, n=42)


@case(n=42)
def c_clip_value_arg(C):
    m, opt, _, lossf = _setup("rmsprop_c")

    @C
    def step(x, y, c):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        nn.utils.clip_grad_value_(m.parameters(), c)
        opt.step()
        return loss

    return std(m, opt, fn=step, args=lambda i: data(i) + (0.01 * (1 + i % 3),))


@case(n=42)
def c_clip_norm_hyper_global_changed(C):
    m, opt, _, lossf = _setup("adam")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), CLIP["v"])
        opt.step()
        return loss

    def change(i):
        CLIP["v"] = {2: 0.01, 9: 100.0, 39: 0.1}[i]

    def fin():
        CLIP["v"] = 1.0
    return std(m, opt, fn=step, change=change, **{"finally": fin})


CLIP = {"v": 1.0}


@case(n=12, refuse_ok=True)
def c_grad_set_none_inside(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        for p in m.parameters():
            p.grad = None
        return loss
    return std(m, opt, fn=step)


@case(n=12, refuse_ok=True)
def c_manual_grad_norm_returned(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        gn = np.sqrt(sum(float((p.grad.astype(np.float64) ** 2).sum()) for p in m.parameters()))
        opt.step()
        return loss, gn
    return std(m, opt, fn=step)


@case(n=12)
def c_grad_noise_global_rng(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        for p in m.parameters():
            p.grad += 0.01 * tt.randn(*p.shape).data.astype(p.grad.dtype)
        opt.step()
        return loss
    return std(m, opt, fn=step)


# ---- hooks added later


@case(n=42)
def c_tensor_hook_on_param_added_outside(C):
    m, opt, _, lossf = _setup("sgd_mom")
    h = {}

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        if i == 2:
            h["h"] = m[0].weight.register_hook(lambda g: g * 0.0)
        elif i == 9:
            h["h"].remove()
        else:
            h["h"] = m[2].bias.register_hook(lambda g: g * 3.0)
    return std(m, opt, fn=step, change=change)


@case(n=42)
def c_forward_hook_added_outside(C):
    m, opt, _, lossf = _setup("adam")
    h = {}

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        if i == 2:
            h["h"] = m[1].register_forward_hook(lambda mod, a, out: out * 0.5)
        elif i == 9:
            h["h"].remove()
            h["p"] = m.register_forward_pre_hook(lambda mod, a: (a[0] * 2.0,))
        else:
            h["p"].remove()
    return std(m, opt, fn=step, change=change)


HOOKSCALE = [1.0]


@case(n=42)
def c_forward_hook_reads_list(C):
    m, opt, _, lossf = _setup("sgd_mom")
    m[0].register_forward_hook(lambda mod, a, out: out * HOOKSCALE[0])

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        HOOKSCALE[0] = {2: 0.5, 9: 2.0, 39: 1.0}[i]
    return std(m, opt, fn=step, change=change)


@case(n=42)
def c_tensor_hook_on_intermediate_inside(C):
    m, opt, _, lossf = _setup("sgd_mom")
    scale = [1.0]

    @C
    def step(x, y):
        opt.zero_grad()
        h = m[0](x)
        h.register_hook(lambda g: g * scale[0])
        loss = lossf(m[2](m[1](h)), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        scale[0] = {2: 0.0, 9: 2.0, 39: 1.0}[i]
    return std(m, opt, fn=step, change=change)


# ---- modules: tying, freezing, modes, EMA, checkpoints, dtype, replacement


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 6, rng=0)
        self.proj = nn.Linear(6, 6, rng=1)
        self.head = nn.Linear(6, 11, bias=False, rng=2)
        self.head.weight = self.emb.weight

    def forward(self, t):
        return self.head(tt.tanh(self.proj(self.emb(t))))


def lm_data(i, b=8):
    r = np.random.default_rng(200 + i)
    return r.integers(0, 11, b), r.integers(0, 11, b)


@pytest.mark.parametrize("oname", ["sgd_mom", "adam", "adamw"])
def test_tied_lm(oname):
    def build(C):
        m = TiedLM()
        opt = OPTS[oname](m.parameters())
        sched = LS.CosineAnnealingLR(opt, 12)
        lossf = nn.CrossEntropyLoss()

        @C
        def step(t, y):
            opt.zero_grad()
            loss = lossf(m(t), y)
            loss.backward()
            nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            sched.step()
            return loss

        def change(i):
            if i == 9:
                m.head.weight = nn.Parameter(m.emb.weight.data.copy())
            elif i == 39:
                m.head.weight = m.emb.weight
        return dict(fn=step, args=lambda i: lm_data(i), change=change,
                    state=lambda: (m, opt, sched), params=lambda: list(m.parameters()))
    check(build, n=42)


@pytest.mark.parametrize("oname", ["sgd_mom", "adam"])
def test_untied_then_tied_by_data(oname):
    def build(C):
        m = TiedLM()
        m.head.weight = nn.Parameter(m.emb.weight.data.copy())
        opt = OPTS[oname](m.parameters())
        lossf = nn.CrossEntropyLoss()

        @C
        def step(t, y):
            opt.zero_grad()
            loss = lossf(m(t), y)
            loss.backward()
            opt.step()
            return loss

        def change(i):
            m.head.weight.data = m.emb.weight.data  # share the array
        return dict(fn=step, args=lambda i: lm_data(i), change=change,
                    state=lambda: (m, opt), params=lambda: list(m.parameters()))
    check(build, n=12)


@pytest.mark.parametrize("mode_change", ["eval_train", "train_inside", "dropout_p", "bn_momentum"])
@pytest.mark.parametrize("drop", [None, 7])
def test_modes_dropout_bn(mode_change, drop):
    def build(C):
        m, opt, sched, lossf = _setup("sgd_mom", "step", drop=drop, bn=True)

        @C
        def step(x, y):
            if mode_change == "train_inside":
                m.train()
            opt.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss

        def change(i):
            if mode_change in ("eval_train", "train_inside"):
                if i == 9:
                    m.eval()
                else:
                    m.train(i != 2)
            elif mode_change == "dropout_p":
                m[3].p = {2: 0.0, 9: 0.9, 39: 0.5}[i]
            else:
                m[1].momentum = {2: 0.5, 9: None, 39: 0.01}[i]
        return std(m, opt, sched, fn=step, change=change, args=lambda i: data(i, bsz(i)))
    check(build, n=42)


@case(n=42)
def c_eval_inside_no_grad_validation(C):
    m, opt, _, lossf = _setup("adam", drop=None, bn=True)

    @C
    def step(x, y, xv, yv):
        m.train()
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        m.eval()
        with tt.no_grad():
            vloss = lossf(m(xv), yv)
        m.train()
        return loss, vloss

    return std(m, opt, fn=step, args=lambda i: data(i) + data(1000 + i, 6))


@pytest.mark.parametrize("form", ["data_ops", "tensor_ops", "lerp_arg"])
def test_ema_inside(form):
    def build(C):
        m, opt, _, lossf = _setup("sgd_mom")
        ema = mlp()
        ema.load_state_dict(m.state_dict())
        for p in ema.parameters():
            p.requires_grad_(False)

        @C
        def step(x, y, decay):
            opt.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            opt.step()
            for pe, p in zip(ema.parameters(), m.parameters()):
                if form == "data_ops":
                    pe.data *= 0.9
                    pe.data += 0.1 * p.data
                elif form == "tensor_ops":
                    with tt.no_grad():
                        pe.mul_(0.9).add_(p.detach() * 0.1)
                else:
                    with tt.no_grad():
                        pe.mul_(decay).add_(p.detach() * (1 - decay))
            with tt.no_grad():
                ev = lossf(ema(x), y)
            return loss, ev

        return dict(fn=step, args=lambda i: data(i) + (min(0.99, (1 + i) / (10 + i)),),
                    state=lambda: (m, opt, ema), params=lambda: list(m.parameters()))
    check(build, n=42)


@case(n=42)
def c_swa_outside_running_average(C):
    m, opt, sched, lossf = _setup("sgd_mom", "cos")
    swa = mlp()
    swa.load_state_dict(m.state_dict())
    cnt = {"n": 0}

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        with tt.no_grad():
            sv = lossf(swa(x), y)
        return loss, sv

    def pre(i, outs):
        if i >= 5:
            cnt["n"] += 1
            for ps, p in zip(swa.parameters(), m.parameters()):
                ps.data += (p.data - ps.data) / cnt["n"]
    return std(m, opt, sched, fn=step, pre=pre)


@pytest.mark.parametrize("oname", ["sgd_mom", "adam", "rmsprop_c"])
def test_checkpoint_reload_midrun(oname):
    def build(C):
        m, opt, sched, lossf = _setup(oname, "multistep", bn=True)
        saved = {}

        @C
        def step(x, y):
            opt.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss

        def change(i):
            if i == 2:
                saved["all"] = (m.state_dict(), opt.state_dict(), sched.state_dict())
            else:
                a, b, c = saved["all"]
                m.load_state_dict(a)
                opt.load_state_dict(b)
                sched.load_state_dict(c)
        return std(m, opt, sched, fn=step, change=change)
    check(build, n=42)


@pytest.mark.parametrize("oname", ["sgd_mom", "adam", "adamw", "rmsprop_c", "sgd"])
def test_model_to_float64_midrun(oname):
    def build(C):
        m, opt, sched, lossf = _setup(oname, "exp")

        @C
        def step(x, y):
            opt.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss

        def change(i):
            if i == 9:
                m.to(np.float64)
            elif i == 39:
                m.to(np.float32)
        return std(m, opt, sched, fn=step, change=change,
                   args=lambda i: data(i, dtype=np.float64 if i >= 20 else np.float32))
    check(build, n=42)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8, rng=0)
        self.fc = nn.Linear(8, 3, rng=1)

    def forward(self, x):
        return self.fc(tt.relu(self.body(x)))


@pytest.mark.parametrize("oname", ["sgd_mom", "adam"])
def test_submodule_replaced_midrun(oname):
    def build(C):
        m = Net()
        H = {"opt": OPTS[oname](m.parameters())}
        lossf = nn.CrossEntropyLoss()

        @C
        def step(x, y):
            H["opt"].zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            H["opt"].step()
            return loss

        def change(i):
            if i == 2:
                m.fc = nn.Linear(8, 3, rng=5)           # the old optimizer misses it
            elif i == 9:
                H["opt"] = OPTS[oname](m.parameters())  # a fresh optimizer
            else:
                m.fc.weight = nn.Parameter(np.zeros((3, 8), np.float32))
        return dict(fn=step, args=lambda i: data(i), change=change,
                    state=lambda: (m, H["opt"]), params=lambda: list(m.parameters()))
    check(build, n=42)


@case(n=42)
def c_param_data_rebound_outside(C):
    m, opt, _, lossf = _setup("adam")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        m[0].weight.data = m[0].weight.data * 0.5
        nn.init.zeros_(m[2].bias)
    return std(m, opt, fn=step, change=change)


@case(n=42)
def c_param_data_noncontiguous_outside(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        w = m[0].weight.data
        m[0].weight.data = np.asfortranarray(w) if i != 39 else np.ascontiguousarray(w)
    return std(m, opt, fn=step, change=change)


@case(n=42)
def c_bn_eps_changed_and_buffers_reset(C):
    m, opt, _, lossf = _setup("adam", bn=True)

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        m[1].eps = {2: 1e-2, 9: 1e-5, 39: 1.0}[i]
        m[1].running_mean.data[...] = 0.0
        m[1].running_var.data = np.ones(8, np.float32)
    return std(m, opt, fn=step, change=change)


@case(n=42)
def c_bn_cumulative_eval_midrun(C):
    m = nn.Sequential(nn.Linear(4, 8, rng=0), nn.BatchNorm1d(8, momentum=None), nn.ReLU(),
                      nn.Linear(8, 3, rng=1))
    opt = tt.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    lossf = nn.CrossEntropyLoss()

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        m[1].num_batches_tracked.data[...] = 0
        m.train(i != 9)
    return std(m, opt, fn=step, change=change, args=lambda i: data(i, bsz(i)))


# ---- numbers as arguments, batch sizes, dtypes


@pytest.mark.parametrize("ttype", [float, np.float32, np.float64])
def test_temperature_arg(ttype):
    def build(C):
        m, opt, _, lossf = _setup("adam")

        @C
        def step(x, y, temp):
            opt.zero_grad()
            loss = lossf(m(x) / temp, y)
            loss.backward()
            opt.step()
            return loss

        return std(m, opt, fn=step, args=lambda i: data(i) + (ttype(0.5 + 0.1 * i),))
    check(build, n=12)


@case(n=42)
def c_int_step_arg_decay_pow(C):
    m, opt, _, lossf = _setup("sgd")

    @C
    def step(x, y, t):
        opt.zero_grad()
        loss = lossf(m(x), y) * (0.97 ** t)
        loss.backward()
        opt.step()
        return loss

    return std(m, opt, fn=step, args=lambda i: data(i) + (i,))


@case(n=42)
def c_kwargs_and_flag(C):
    m, opt, _, lossf = _setup("adamw", drop=None)

    @C
    def step(x, y, *, clip=True, lr=0.01):
        opt.param_groups[0]["lr"] = lr
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        return loss

    def args(i):
        x, y = data(i, bsz(i))
        return dict(x=x, y=y, clip=(i % 3 != 0), lr=0.01 / (1 + i))
    return std(m, opt, fn=step, args=args)


@case(n=42)
def c_labels_dtype_changes(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def args(i):
        x, y = data(i, bsz(i))
        return x, y.astype(np.int32 if i >= 9 else np.int64) if i < 39 else np.eye(3)[y]
    return std(m, opt, fn=step, args=args)


@case(n=42)
def c_tensor_vs_array_args_alternate(C):
    m, opt, _, lossf = _setup("adam")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def args(i):
        x, y = data(i)
        return (tt.tensor(x) if i % 2 else x), y
    return std(m, opt, fn=step, args=args)


@case(n=42, refuse_ok=True)
def c_input_requires_grad_arg(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss, x.grad

    def args(i):
        x, y = data(i)
        return tt.tensor(x, requires_grad=(i >= 9)), y
    return std(m, opt, fn=step, args=args)


# ---- Python state in closures, globals, attributes

HIST = []


@case(n=12)
def c_history_appended_outside(C):
    m, opt, _, lossf = _setup("sgd_mom")
    HIST.clear()

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y) * (1.0 + 0.1 * len(HIST))
        loss.backward()
        opt.step()
        return loss

    def pre(i, outs):
        if outs:
            HIST.append(float(outs[-1]))
    return std(m, opt, fn=step, pre=pre)


@case(n=12, refuse_ok=True)
def c_history_appended_inside(C):
    m, opt, _, lossf = _setup("sgd_mom")
    hist = []

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        hist.append(loss)
        return loss
    return std(m, opt, fn=step, state=lambda: (m, opt, len(hist)))


@case(n=12, refuse_ok=True)
def c_item_after_step_refused(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return std(m, opt, fn=step)


@case(n=12)
def c_item_before_backward_branch(C):
    m, opt, _, lossf = _setup("sgd_mom")

    @C
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        if loss.item() > 1.1:
            loss = loss * 0.5
        loss.backward()
        opt.step()
        return loss
    return std(m, opt, fn=step)


@case(n=12, refuse_ok=True)
def c_counter_attribute_inside(C):
    m, opt, _, lossf = _setup("sgd_mom")

    class T:
        n = 0
    t = T()

    @C
    def step(x, y):
        t.n += 1
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss
    return std(m, opt, fn=step, state=lambda: (m, opt, t.n))


class Trainer:
    def __init__(self, oname="sgd_mom", sname="step"):
        self.m = mlp()
        self.opt = OPTS[oname](self.m.parameters())
        self.sched = SCHEDS[sname](self.opt)
        self.lossf = nn.CrossEntropyLoss()
        self.clip = 1.0
        self.steps = 0

    def train_step(self, x, y):
        self.opt.zero_grad()
        loss = self.lossf(self.m(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(self.m.parameters(), self.clip)
        self.opt.step()
        if self.sched is not None:
            self.sched.step()
        return loss * (1.0 + 0.0 * self.steps)


@pytest.mark.parametrize("sname", ["step", "cos", "onecycle", "none"])
def test_bound_method_compiled_attr_changed(sname):
    def build(C):
        tr = Trainer("adam", sname)
        step = C(tr.train_step)

        def pre(i, outs):
            tr.steps = i

        def change(i):
            tr.clip = {2: 0.1, 9: 10.0, 39: 0.5}[i]
        return dict(fn=step, args=lambda i: data(i), pre=pre, change=change,
                    state=lambda: (tr.m, tr.opt, tr.sched, tr.clip),
                    params=lambda: list(tr.m.parameters()))
    check(build, n=42)


@pytest.mark.parametrize("oname", ["sgd_mom", "adam"])
def test_method_decorator_two_instances(oname):
    def build(C):
        class T2(Trainer):
            @C
            def train_step(self, x, y):
                return Trainer.train_step(self, x, y)

        a, b = T2(oname, "cos"), T2(oname, "step")
        b.m.load_state_dict({k: v * 2 for k, v in b.m.state_dict().items()})

        def fn(x, y):
            return a.train_step(x, y), b.train_step(x, y)

        def change(i):
            a.clip, b.clip = b.clip, 0.3
        return dict(fn=fn, args=lambda i: data(i), change=change,
                    state=lambda: (a.m, a.opt, a.sched, b.m, b.opt, b.sched),
                    params=lambda: list(a.m.parameters()) + list(b.m.parameters()))
    check(build, n=42)


@pytest.mark.parametrize("oname", ["sgd_mom", "adam", "rmsprop_c"])
def test_compiled_module_step_outside(oname):
    def build(C):
        m, opt, sched, lossf = _setup(oname, "cos", bn=True, drop=None)
        cm = C(m)

        def fn(x, y):
            opt.zero_grad()
            loss = lossf(cm(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss

        def change(i):
            if i == 2:
                m.eval()
            elif i == 9:
                m.train()
                m.to(np.float64)
            else:
                m[0].weight.requires_grad_(False)
        return std(m, opt, sched, fn=fn, change=change, args=lambda i: data(i, bsz(i)))
    check(build, n=42)


@pytest.mark.parametrize("oname", ["sgd_mom", "adam"])
def test_compiled_forward_loss_tape_entry(oname):
    def build(C):
        m, opt, sched, lossf = _setup(oname, "linear", drop=None)
        fwd = C(lambda x, y: lossf(m(x), y))

        def fn(x, y):
            opt.zero_grad()
            loss = fwd(x, y)
            loss.backward()
            nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
            sched.step()
            return loss

        def change(i):
            m.train(i != 9)
        return std(m, opt, sched, fn=fn, change=change)
    check(build, n=42)


def test_disable_switch_midrun():
    def build(C):
        m, opt, sched, lossf = _setup("adam", "cos", drop=None)

        @C
        def step(x, y):
            opt.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss

        def change(i):
            tt.compile.disable(i == 9)
        return std(m, opt, sched, fn=step, change=change,
                   **{"finally": lambda: tt.compile.disable(False)})
    check(build, n=42)


def test_recompiles_explain_batch_and_dtype():
    m, opt, _, lossf = _setup("sgd_mom")

    @tt.compile
    def step(x, y):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    for i in range(12):
        step(*data(i, bsz(i), dtype=np.float64 if i >= 10 else np.float32))
    r = step.recompiles
    assert len(r) == 3, r
    assert all(isinstance(s, str) for s in r)
    assert step.traces == 3


def test_recompiles_explain_number_key():
    m, opt, _, lossf = _setup("sgd_mom")

    @tt.compile
    def step(x, y, k):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        if k > 5:
            opt.step()
        return loss

    for i in range(4):
        step(*data(i), float(i))
    assert any("cache key" in s for s in step.recompiles), step.recompiles


def test_recompiles_one_program_for_lr_arg():
    m, opt, _, lossf = _setup("sgd_mom")

    @tt.compile
    def step(x, y, lr):
        opt.param_groups[0]["lr"] = lr
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        return loss

    for i in range(20):
        step(*data(i), 0.1 * math.cos(i / 20))
    assert len(step.recompiles) == 1, step.recompiles


def test_disable_returns_previous():
    prev = tt.compile.disable()
    try:
        assert prev is False
        assert tt.compile.disable(True) is True
    finally:
        tt.compile.disable(False)



# ---- in-place NumPy ufuncs on .grad / .data with a number argument (loss scaling, weight decay)

INPLACE_FORMS = [
    ("grad", "idiv"), ("grad", "imul_recip"), ("grad", "imul"), ("grad", "isub_scalar"),
    ("grad", "iadd_scaled_data"), ("grad", "ellipsis_div"), ("data", "imul_decay"),
    ("data", "isub_scaled_grad"), ("data", "iadd_scalar"), ("data", "ellipsis_decay"),
]
INPLACE_SOURCES = ["arg_const", "arg_cycling", "closure", "np_float32_arg"]


R_SILENT = ("SILENT: an in-place NumPy ufunc on p.grad whose other operand is a number "
            "argument (p.grad /= scale, *= 1/scale, *= s, -= s*c) is wrong on replay: the "
            "parameters after opt.step() differ from eager's from the first replayed call on")
R_DATA_AUG = ("FALSE REFUSAL: p.data *= 1 - s*c / p.data += s*c with s a number argument is "
              "refused as a `t.data = ...` rebinding; the docs list in-place writes into a "
              "parameter's memory (p.data -= lr * p.grad) as lines of the program")
R_DATA_ELL = ("FALSE REFUSAL: p.data[...] = p.data * (1 - s*c) (an in-place write into a "
              "parameter's own memory, listed as a line) is refused as a NumPy index write")


# All 31 were fixed after the round was written (in-place operators with a number argument and
# writes into part of p.grad / p.data are lines of the program): their xfail markers are dropped,
# the reasons kept as the record of what differed.
FIXED = True


def _inplace_params():
    out = []
    for target, op in INPLACE_FORMS:
        for src in INPLACE_SOURCES:
            reason = None
            if src != "closure":
                if target == "grad" and op in ("idiv", "imul_recip", "imul", "isub_scalar"):
                    reason = R_SILENT
                elif target == "data" and op in ("imul_decay", "iadd_scalar"):
                    reason = R_DATA_AUG
            if target == "data" and op == "ellipsis_decay":
                reason = R_DATA_ELL
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason and not FIXED else []
            out.append(pytest.param(target, op, src, marks=marks,
                                    id=f"{target}-{op}-{src}"))
    return out


@pytest.mark.parametrize("target,op,src", _inplace_params())
def test_inplace_number_operand(target, op, src):
    def build(C):
        m, opt, _, lossf = _setup("sgd")
        held = [8.0]

        @C
        def step(x, y, s):
            if src == "closure":
                s = held[0]
            opt.zero_grad()
            loss = lossf(m(x), y)
            (loss * 4.0).backward()
            for p in m.parameters():
                if target == "grad":
                    if op == "idiv":
                        p.grad /= s
                    elif op == "imul_recip":
                        p.grad *= 1.0 / s
                    elif op == "imul":
                        p.grad *= s
                    elif op == "isub_scalar":
                        p.grad -= s * 0.001
                    elif op == "iadd_scaled_data":
                        p.grad += (s * 1e-3) * p.data
                    else:
                        p.grad[...] = p.grad / s
                else:
                    if op == "imul_decay":
                        p.data *= 1 - s * 1e-3
                    elif op == "isub_scaled_grad":
                        p.data -= s * 1e-3 * p.grad
                    elif op == "iadd_scalar":
                        p.data += s * 1e-4
                    else:
                        p.data[...] = p.data * (1 - s * 1e-3)
            opt.step()
            return loss

        def sval(i):
            v = 8.0 if src in ("arg_const", "closure") else 2.0 ** (i % 3 + 2)
            return np.float32(v) if src == "np_float32_arg" else v

        def change(i):
            held[0] = {2: 4.0, 9: 16.0, 39: 8.0}[i]
        return std(m, opt, fn=step, change=change, args=lambda i: data(i) + (sval(i),))
    check(build, n=12)


# ---- index writes into .grad / .data after backward()

INDEX_FORMS = ["grad_row_zero", "grad_col_zero", "grad_ellipsis_zero", "grad_row_imul",
               "grad_slice_from_expr", "data_row_zero", "data_ellipsis_clip",
               "tensor_setitem_no_grad", "tensor_clamp_", "grad_where_new"]


R_INDEX = ("FALSE REFUSAL: an index write into p.grad / p.data after backward() "
           "(p.grad[0] = 0, p.grad[...] = 0, p.grad[1] *= .5, p.data[...] = np.clip(...)) is "
           "refused as a write 'into a value computed from traced data'; the docs list "
           "`p.grad[...] = ...` and in-place writes into a parameter's memory as lines")
INDEX_XFAIL = {"grad_row_zero", "grad_col_zero", "grad_ellipsis_zero", "grad_row_imul",
               "grad_slice_from_expr", "data_row_zero", "data_ellipsis_clip"}


@pytest.mark.parametrize("form", [
    pytest.param(f, marks=[pytest.mark.xfail(strict=True, reason=R_INDEX)] if f in INDEX_XFAIL
                 and not FIXED else []) for f in INDEX_FORMS])
def test_index_write_after_backward(form):
    def build(C):
        m, opt, _, lossf = _setup("sgd_mom")

        @C
        def step(x, y):
            opt.zero_grad()
            loss = lossf(m(x), y)
            loss.backward()
            w = m[0].weight
            if form == "grad_row_zero":
                w.grad[0] = 0.0
            elif form == "grad_col_zero":
                w.grad[:, 1] = 0.0
            elif form == "grad_ellipsis_zero":
                w.grad[...] = 0.0
            elif form == "grad_row_imul":
                w.grad[1] *= 0.5
            elif form == "grad_slice_from_expr":
                w.grad[:2] = w.grad[:2] * 0.5
            elif form == "data_row_zero":
                w.data[0] = 0.0
            elif form == "data_ellipsis_clip":
                w.data[...] = np.clip(w.data, -0.3, 0.3)
            elif form == "tensor_setitem_no_grad":
                with tt.no_grad():
                    w[0] = 0.0
            elif form == "tensor_clamp_":
                with tt.no_grad():
                    w.clamp_(-0.3, 0.3)
            else:
                w.grad = np.where(np.abs(w.grad) > 0.01, w.grad, 0.0).astype(w.grad.dtype)
            opt.step()
            return loss
        return std(m, opt, fn=step)
    check(build, n=12)


# ---- registration of the targeted cases

XFAIL_REASONS = {
    "INPLACE_NUM": "SILENT: loss scaling p.grad /= scale with scale a number argument: "
                   "parameters differ from eager's once a program for a scale is replayed",
    "GRAD_INDEX": "FALSE REFUSAL: p.grad[0] = 0.0 after backward() refused as a write into "
                  "a value computed from traced data (docs list p.grad[...] = ... as a line)",
}


def _params():
    out = []
    for name, (f, n, refuse_ok, xfail) in CASES.items():
        marks = ()
        if xfail and not FIXED:
            marks = pytest.mark.xfail(strict=True, reason=XFAIL_REASONS.get(xfail, xfail))
        out.append(pytest.param(f, n, refuse_ok, id=name[2:], marks=marks))
    return out


@pytest.mark.parametrize("build,n,refuse_ok", _params())
def test_case(build, n, refuse_ok):
    check(build, n=n, refuse_ok=refuse_ok)
