"""Round 30b: long compiled training loops whose behaviour changes mid-run.

Every case builds the same model, optimizer, schedulers and Python-side state twice from the
same seeds, runs the loop eagerly and with the whole step under `tt.compile`, and compares after
every step, bit for bit (type, dtype, shape, bytes): the returned values, every parameter and
`.grad`, `requires_grad`, buffers, `opt.state_dict()`, `sched.state_dict()`, the Python-side
state (loss scale, counters, best loss), Tensors written inside (EMA copies, counters) and the
tinytensor / NumPy / `random` generator states. A refusal passes only where the compile guide
lists it for the pattern (a value read into Python after `backward()`, Python state changed
inside, `scheduler.step(metric)` with a metric computed inside, `.data` of an array argument);
`max_programs` checks `.recompiles` where the guide promises a bounded number of recordings
(number arguments are inputs, Tensors written in place are inputs, bool outcomes are guards).

Themes: dynamic loss scaling by hand (scale in an attribute, a dict, a 0-d array, a Tensor, or
passed as float / np.float64 / 0-d array / Tensor; skipped steps, halving, growth every N good
steps, overflow forced by huge inputs at steps 5, 17, 18, 29; float16, float32, float64
parameters), clipping whose decision flips, NaN guards inside and outside the step, loss spikes
cutting the lr, ReduceLROnPlateau, early stopping counters, gradient accumulation decided by a
counter, EMA with warmup decay, warmup + cosine, curriculum (batch size and sequence length
changing at steps 30 and 60), dropout rate and train/eval changed mid-run, freezing and
unfreezing, swapping optimizers, `zero_grad(set_to_none=True/False)` variants, and writes or
draws made before a value guard that fails midway.

Counts: 225 cases; 221 pass: 175 equal, 46 refused where the guide lists the refusal; 4 strict
xfails. Rollback cases (a Tensor counter, Dropout draws, BatchNorm statistics before a
`bool(tt.isfinite(loss))` guard that fails at the overflow steps) are all equal.

xfails by class:

* guard-rollback (4: accum-tensor-stn{0,1}-k{2,3}): a counter Tensor `cnt.add_(1)`-ed inside the
  step and then read with `int(cnt.item())` (a value guard) is not put back when that guard
  fails midway: each re-recording adds again, so the counter runs 1, 3, 6, 10 instead of 1, 2,
  3, 4 and the accumulation steps on the wrong calls (params and grads differ from step 1).

Documented, not xfailed (noted): a loss read with `loss.item()` in a guard before `backward()`
(nan-inside_item), an int step count used in Python (`min`, `math.cos`: ema-int, warmcos-int_math,
accum-int), a plateau metric passed as a float argument (plateau-arg) and a Python attribute the
step merely names (early-outside_named) record a program per value until the limit of 8, then
run eagerly with one warning; the values stay equal.
"""

import math
import random
import struct
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

# ----- harness

F16, F32, F64 = np.float16, np.float32, np.float64
BIG = {F16: 1e5, F32: 1e20, F64: 1e200}


def seed_all():
    tt.manual_seed(0)
    np.random.seed(0)
    random.seed(0)


def canon(v, depth=0):
    """Type, dtype, shape and bytes of v, recursively."""
    if depth > 8:
        return ("deep", type(v).__name__)
    if isinstance(v, tt.Tensor):
        return ("Tensor", bool(v.requires_grad), canon(v.data, depth + 1))
    if isinstance(v, np.ndarray):
        return ("ndarray", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, np.generic):
        return ("npscalar", type(v).__name__, v.dtype.str, v.tobytes())
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return (type(v).__name__, v)
    if isinstance(v, float):
        return ("float", struct.pack("<d", v))
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, dict):
        return ("dict", tuple((repr(k), canon(x, depth + 1)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(canon(x, depth + 1) for x in v))
    if isinstance(v, SimpleNamespace):
        return ("ns", canon(vars(v), depth + 1))
    if callable(v):
        return ("callable", getattr(v, "__name__", type(v).__name__))
    return ("other", type(v).__name__, repr(v))


def snapshot(c, out):
    snap = {"out": canon(out)}
    for mi, m in enumerate(c.modules):
        for name, p in m.named_parameters():
            snap[f"m{mi}.{name}"] = canon(p.data)
            snap[f"m{mi}.{name}.grad"] = canon(p.grad)
            snap[f"m{mi}.{name}.rg"] = bool(p.requires_grad)
        for name, b in m.named_buffers():
            snap[f"m{mi}.buf.{name}"] = canon(b)
        snap[f"m{mi}.training"] = m.training
    for oi, o in enumerate(c.opts):
        snap[f"opt{oi}"] = canon(o.state_dict())
    for si, s in enumerate(c.scheds):
        snap[f"sched{si}"] = canon(s.state_dict())
    snap["state"] = canon(c.state)
    for ti, t in enumerate(c.tensors):
        snap[f"t{ti}"] = canon(t)
    snap["tt_rng"] = canon(tt.get_rng_state())
    st = np.random.get_state()
    snap["np_rng"] = (st[0], st[1].tobytes(), st[2:])
    snap["py_rng"] = random.getstate()
    return snap


class Stop(Exception):
    pass


def run(build, variant, n, compiled):
    seed_all()
    c = build(*variant)
    fn = tt.compile(c.step) if compiled else c.step
    snaps = []
    for i in range(n):
        try:
            out = c.drive(i, fn)
        except Stop:
            snaps.append("stopped")
            break
        snaps.append(snapshot(c, out))
    return snaps, fn


def check(build, variant, n, refusal_ok, max_programs):
    eager, _ = run(build, variant, n, False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            comp, fn = run(build, variant, n, True)
        except RuntimeError as e:
            if "tt.compile" in str(e):
                if refusal_ok:
                    return
                raise AssertionError(f"false refusal: {str(e)[:300]}") from e
            raise
    for i, (a, b) in enumerate(zip(eager, comp)):
        if a == b:
            continue
        if a == "stopped" or b == "stopped":
            raise AssertionError(f"step {i}: one loop stopped, the other did not")
        keys = [k for k in a if a[k] != b.get(k)]
        raise AssertionError(
            f"step {i}: differs in {keys[:6]} (warnings: {[str(x.message)[:80] for x in w]})")
    assert len(eager) == len(comp)
    if max_programs is not None:
        assert len(fn.recompiles) <= max_programs, f"{len(fn.recompiles)} programs: {fn.recompiles[-3:]}"


# ----- building blocks


def mlp(dtype, drop=None, seed=0):
    layers = [nn.Linear(3, 4, rng=seed), nn.Tanh()]
    if drop is not None:
        layers.append(nn.Dropout(drop))
    layers.append(nn.Linear(4, 2, rng=seed + 1))
    m = nn.Sequential(*layers)
    m.to(dtype)
    return m


def make_opt(kind, params, lr=0.05):
    params = list(params)
    if kind == "sgd":
        return tt.optim.SGD(params, lr=lr, momentum=0.9)
    if kind == "adam":
        return tt.optim.Adam(params, lr=lr * 0.2)
    if kind == "adamw":
        return tt.optim.AdamW(params, lr=lr * 0.2, weight_decay=0.1)
    if kind == "rmsprop":
        return tt.optim.RMSprop(params, lr=lr * 0.2)
    raise ValueError(kind)


def batch(i, n=5, big=(), dtype=F64, scale=1.0, t=None):
    rng = np.random.default_rng(1000 + i)
    shape = (n, 3) if t is None else (n, t, 3)
    x = rng.standard_normal(shape) * scale
    y = rng.standard_normal((n, 2))
    if i in big:
        x = x * BIG[dtype]
    return x, y


mse = nn.MSELoss()


def ctx(**kw):
    base = dict(modules=[], opts=[], scheds=[], state=None, tensors=[])
    base.update(kw)
    return SimpleNamespace(**base)


# scale holders: a Python attribute, a dict, a 0-d NumPy array, a Tensor


class Holder:
    def __init__(self, kind, scale):
        self.kind = kind
        if kind == "attr":
            self.o = SimpleNamespace(scale=scale, good=0)
        elif kind == "dict":
            self.o = {"scale": scale, "good": 0}
        elif kind == "np0d":
            self.o = np.array(scale)
            self.g = np.array(0)
        else:
            self.o = tt.tensor(np.array(scale))
            self.g = tt.tensor(np.array(0.0))

    def state(self):
        return (self.o, getattr(self, "g", None))


def h_val(h):
    if h.kind == "attr":
        return h.o.scale
    if h.kind == "dict":
        return h.o["scale"]
    return h.o


def h_raw(h):
    if h.kind == "tensor":
        return h.o.data
    return h_val(h)


def h_mul(h, f):
    if h.kind == "attr":
        h.o.scale *= f
    elif h.kind == "dict":
        h.o["scale"] *= f
    elif h.kind == "np0d":
        h.o *= f
    else:
        with tt.no_grad():
            h.o.mul_(f)


def h_good_inc(h):
    if h.kind == "attr":
        h.o.good += 1
    elif h.kind == "dict":
        h.o["good"] += 1
    elif h.kind == "np0d":
        h.g += 1
    else:
        with tt.no_grad():
            h.g.add_(1.0)


def h_good_reset(h):
    if h.kind == "attr":
        h.o.good = 0
    elif h.kind == "dict":
        h.o["good"] = 0
    elif h.kind == "np0d":
        h.g[...] = 0
    else:
        with tt.no_grad():
            h.g.zero_()


def h_good(h):
    if h.kind == "attr":
        return h.o.good
    if h.kind == "dict":
        return h.o["good"]
    if h.kind == "np0d":
        return int(h.g)
    return int(h.g.item())


def h_set_outside(h, v):
    if h.kind == "attr":
        h.o.scale = v
    elif h.kind == "dict":
        h.o["scale"] = v
    elif h.kind == "np0d":
        h.o[...] = v
    else:
        h.o.data[...] = v


def grads_finite(params):
    return all(bool(np.isfinite(p.grad).all()) for p in params if p.grad is not None)


OVERFLOW = (5, 17, 18, 29)


# ----- A: split loss scaling


def b_ls_split(holder, dtype, okind):
    model = mlp(dtype)
    params = list(model.parameters())
    opt = make_opt(okind, params)
    arg = holder.startswith("arg_")
    h = Holder("tensor" if holder == "arg_tensor" else ("attr" if arg else holder), 2.0 ** 10)
    S = SimpleNamespace(good=0, skipped=0, scale=2.0 ** 10)

    if arg:
        def step(x, y, scale):
            opt.zero_grad()
            loss = mse(model(x), y)
            (loss * scale).backward()
            inv = 1.0 / scale if not isinstance(scale, tt.Tensor) else 1.0 / scale.data
            for p in params:
                p.grad *= inv
            return loss
    else:
        def step(x, y):
            opt.zero_grad()
            loss = mse(model(x), y)
            (loss * h_val(h)).backward()
            for p in params:
                p.grad /= h_raw(h)
            return loss

    def drive(i, fn):
        x, y = batch(i, big=OVERFLOW, dtype=dtype)
        if arg:
            s = S.scale
            a = {"arg_float": s, "arg_np64": np.float64(s), "arg_0d": np.array(s),
                 "arg_tensor": h.o}[holder]
            loss = fn(x, y, a)
        else:
            loss = fn(x, y)
        if grads_finite(params):
            opt.step()
            S.good += 1
            if S.good == 6:
                S.scale *= 2.0
                S.good = 0
        else:
            S.scale *= 0.5
            S.good = 0
            S.skipped += 1
        h_set_outside(h, S.scale)
        return loss

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], state=(S, h.state()))


# ----- B: whole step, Python branch on grads


def b_ls_whole_branch(holder, dtype):
    model = mlp(dtype)
    params = list(model.parameters())
    opt = make_opt("sgd", params)
    h = Holder(holder, 2.0 ** 8)

    def step(x, y):
        opt.zero_grad()
        loss = mse(model(x), y)
        (loss * h_val(h)).backward()
        if not all(np.isfinite(p.grad).all() for p in params):
            h_mul(h, 0.5)
            return loss, False
        for p in params:
            p.grad /= h_raw(h)
        opt.step()
        return loss, True

    def drive(i, fn):
        x, y = batch(i, big=OVERFLOW, dtype=dtype)
        return fn(x, y)

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], state=h.state())


# ----- C: whole step, guard on the scaled loss


def b_ls_whole_lossguard(holder, dtype, okind):
    model = mlp(dtype)
    params = list(model.parameters())
    opt = make_opt(okind, params)
    h = Holder(holder, 2.0 ** 8)

    def step(x, y):
        if h_good(h) >= 5:
            h_mul(h, 2.0)
            h_good_reset(h)
        opt.zero_grad()
        loss = mse(model(x), y)
        sl = loss * h_val(h)
        if not bool(tt.isfinite(sl)):
            h_mul(h, 0.5)
            h_good_reset(h)
            return loss, False
        sl.backward()
        for p in params:
            p.grad /= h_raw(h)
        opt.step()
        h_good_inc(h)
        return loss, True

    def drive(i, fn):
        x, y = batch(i, big=OVERFLOW, dtype=dtype)
        return fn(x, y)

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], state=h.state())


# ----- D: clipping whose decision flips


def b_clip(kind, okind, dtype):
    model = mlp(dtype)
    params = list(model.parameters())
    opt = make_opt(okind, params)

    def step(x, y):
        opt.zero_grad()
        loss = mse(model(x), y)
        loss.backward()
        if kind == "norm":
            r = nn.utils.clip_grad_norm_(params, 0.8)
        elif kind == "value":
            nn.utils.clip_grad_value_(params, 0.3)
            r = None
        elif kind == "numpy":
            total = np.sqrt(sum(float(0) + (p.grad.astype(np.float64) ** 2).sum() for p in params))
            coef = np.minimum(1.0, 0.8 / (total + 1e-6))
            for p in params:
                p.grad *= coef.astype(p.grad.dtype)
            r = total
        else:  # python branch after backward: a documented refusal
            total = math.sqrt(sum(float((p.grad ** 2).sum()) for p in params))
            if total > 0.8:
                for p in params:
                    p.grad *= 0.8 / total
            r = total
        opt.step()
        return loss, r

    def drive(i, fn):
        x, y = batch(i, scale=1.0 + 3.0 * (i % 3 == 0))
        return fn(x, y)

    return ctx(step=step, drive=drive, modules=[model], opts=[opt])


# ----- E: NaN guards


def b_nan(kind, okind, dtype):
    model = mlp(dtype)
    params = list(model.parameters())
    opt = make_opt(okind, params)
    S = SimpleNamespace(skipped=0, logged=[])
    sched = tt.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.7)
    probe = None

    if kind.startswith("inside"):
        def step(x, y):
            if kind == "inside_zg_first_true":
                opt.zero_grad(set_to_none=True)
            elif kind == "inside_zg_first_false":
                opt.zero_grad(set_to_none=False)
            loss = mse(model(x), y)
            if kind == "inside_item":
                if not np.isfinite(loss.item()):
                    return None
            elif not bool(tt.isfinite(loss)):
                return None
            if kind == "inside_zg_after":
                opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            return loss
    else:
        def step(x, y):
            opt.zero_grad()
            loss = mse(model(x), y)
            loss.backward()
            opt.step()
            return loss

        if kind == "outside_probe":
            def probe(x, y):
                with tt.no_grad():
                    return mse(model(x), y)

    cache = {}

    def drive(i, fn):
        x, y = batch(i, big=OVERFLOW, dtype=dtype)
        if kind == "outside_probe":
            pf = cache.setdefault(fn is step, tt.compile(probe) if fn is not step else probe)
            if not np.isfinite(pf(x, y).item()):
                S.skipped += 1
                return None
        out = fn(x, y)
        if out is None:
            S.skipped += 1
            return None
        if not kind.startswith("inside"):
            if not np.isfinite(out.item()):
                S.skipped += 1
                return out
            sched.step()
        S.logged.append(float(out))
        return out

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], scheds=[sched], state=S)


# ----- F: loss spikes cut the lr


def b_spike(kind, okind, dtype):
    model = mlp(dtype)
    params = list(model.parameters())
    opt = make_opt(okind, params)
    S = SimpleNamespace(avg=None, lr=opt.param_groups[0]["lr"], cuts=0, thresh=3.0)

    if kind == "arg":
        def step(x, y, lr):
            opt.param_groups[0]["lr"] = lr
            opt.zero_grad()
            loss = mse(model(x), y)
            loss.backward()
            opt.step()
            return loss
    elif kind == "inside":
        def step(x, y):
            opt.zero_grad()
            loss = mse(model(x), y)
            if loss.item() > S.thresh:
                opt.param_groups[0]["lr"] *= 0.5
            loss.backward()
            opt.step()
            return loss
    else:
        def step(x, y):
            opt.zero_grad()
            loss = mse(model(x), y)
            loss.backward()
            opt.step()
            return loss

    def drive(i, fn):
        x, y = batch(i, scale=1.0 + 4.0 * (i in (9, 21, 33)))
        loss = fn(x, y, S.lr) if kind == "arg" else fn(x, y)
        v = float(loss)
        if kind != "inside":
            if S.avg is not None and v > 2.0 * S.avg:
                S.lr *= 0.5
                S.cuts += 1
                if kind == "outside":
                    opt.param_groups[0]["lr"] = S.lr
            S.avg = v if S.avg is None else 0.9 * S.avg + 0.1 * v
        return loss

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], state=S)


# ----- G: ReduceLROnPlateau


def b_plateau(kind, okind, dtype):
    model = mlp(dtype)
    opt = make_opt(okind, model.parameters())
    sched = tt.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=2, threshold=0.05)

    def step(x, y, *metric):
        opt.zero_grad()
        loss = mse(model(x), y)
        loss.backward()
        opt.step()
        if kind == "inside":
            sched.step(loss.item())
        elif kind == "arg":
            sched.step(metric[0])
        return loss

    prev = [1.0]

    def drive(i, fn):
        x, y = batch(i % 4)
        loss = fn(x, y, prev[0]) if kind == "arg" else fn(x, y)
        if kind == "outside":
            sched.step(float(loss))
        prev[0] = float(loss)
        return loss

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], scheds=[sched], state=prev)


# ----- H: early stopping


def b_early(kind, okind, dtype):
    model = mlp(dtype)
    opt = make_opt(okind, model.parameters(), lr=0.5)
    S = SimpleNamespace(best=math.inf, bad=0)
    best_t = tt.tensor(np.array(np.inf, dtype))
    bad_t = tt.tensor(np.array(0.0))

    if kind == "inside":
        def step(x, y):
            opt.zero_grad()
            loss = mse(model(x), y)
            v = loss.item()
            if v < S.best - 1e-3:
                S.best, S.bad = v, 0
            else:
                S.bad += 1
            loss.backward()
            opt.step()
            return loss
    elif kind == "tensor":
        def step(x, y):
            opt.zero_grad()
            loss = mse(model(x), y)
            with tt.no_grad():
                better = loss.detach() < best_t - 1e-3
                bad_t.copy_(tt.where(better, tt.zeros_like(bad_t), bad_t + 1.0))
                best_t.copy_(tt.where(better, loss.detach(), best_t))
            loss.backward()
            opt.step()
            return loss
    elif kind == "outside_named":
        def step(x, y):
            opt.zero_grad()
            loss = mse(model(x), y)
            if loss is None:
                S.bad = -1  # never runs: only names S's attributes
            loss.backward()
            opt.step()
            return loss
    else:
        def step(x, y):
            opt.zero_grad()
            loss = mse(model(x), y)
            loss.backward()
            opt.step()
            return loss

    def drive(i, fn):
        x, y = batch(i % 3)
        loss = fn(x, y)
        if kind.startswith("outside"):
            v = float(loss)
            if v < S.best - 1e-3:
                S.best, S.bad = v, 0
            else:
                S.bad += 1
        bad = S.bad if kind != "tensor" else int(bad_t.item())
        if bad >= 4:
            raise Stop
        return loss

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], state=S, tensors=[best_t, bad_t])


# ----- I: gradient accumulation


def b_accum(kind, stn, k):
    model = mlp(F32)
    opt = make_opt("sgd", model.parameters())
    S = SimpleNamespace(n=0)
    cnt = tt.tensor(np.array(0.0))

    def finish(do):
        if do:
            opt.step()
            opt.zero_grad(set_to_none=stn)

    if kind == "attr":
        def step(x, y):
            S.n += 1
            loss = mse(model(x), y) / k
            loss.backward()
            finish(S.n % k == 0)
            return loss
    elif kind == "tensor":
        def step(x, y):
            with tt.no_grad():
                cnt.add_(1.0)
            do = int(cnt.item()) % k == 0
            loss = mse(model(x), y) / k
            loss.backward()
            finish(do)
            return loss
    else:
        def step(x, y, i):
            if kind == "bool":
                do = i
            elif kind == "int":
                do = (i + 1) % k == 0
            else:
                do = bool((i + 1) % k == 0)
            loss = mse(model(x), y) / k
            loss.backward()
            finish(do)
            return loss

    def drive(i, fn):
        x, y = batch(i)
        if kind in ("attr", "tensor"):
            return fn(x, y)
        a = {"bool": (i + 1) % k == 0, "int": i, "0d": np.array(i)}[kind]
        return fn(x, y, a)

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], state=S, tensors=[cnt])


# ----- J: EMA with warmup decay


def b_ema(kind, okind, dtype):
    model = mlp(dtype)
    params = list(model.parameters())
    opt = make_opt(okind, params)
    ema = [tt.tensor(p.data.copy()) for p in params]
    S = SimpleNamespace(t=0)
    t_t = tt.tensor(np.array(0.0))

    def update(d):
        with tt.no_grad():
            for e, p in zip(ema, params):
                e.mul_(d).add_(p.detach() * (1 - d))

    def core(x, y):
        opt.zero_grad()
        loss = mse(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if kind == "int":
        def step(x, y, t):
            loss = core(x, y)
            update(min(0.99, (1 + t) / (10 + t)))
            return loss
    elif kind == "float":
        def step(x, y, d):
            loss = core(x, y)
            update(d)
            return loss
    elif kind == "tensor":
        def step(x, y):
            loss = core(x, y)
            with tt.no_grad():
                t_t.add_(1.0)
                d = tt.minimum((1 + t_t) / (10 + t_t), 0.99)
            update(d)
            return loss
    else:
        def step(x, y):
            loss = core(x, y)
            update(min(0.99, (1 + S.t) / (10 + S.t)))
            return loss

    def drive(i, fn):
        x, y = batch(i)
        if kind == "int":
            out = fn(x, y, i)
        elif kind == "float":
            out = fn(x, y, min(0.99, (1 + i) / (10 + i)))
        else:
            out = fn(x, y)
        S.t += 1
        return out

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], state=S, tensors=ema + [t_t])


# ----- K: warmup then cosine


def lr_at(i, base=0.05, warm=8, total=40):
    if i < warm:
        return base * (i + 1) / warm
    return 0.5 * base * (1 + math.cos(math.pi * (i - warm) / (total - warm)))


def b_warmcos(kind, okind, dtype):
    model = mlp(dtype)
    opt = make_opt(okind, model.parameters(), lr=0.05)
    base = opt.param_groups[0]["lr"]
    scheds = []
    if kind == "sequential":
        s1 = tt.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=8)
        s2 = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=32)
        scheds = [tt.optim.lr_scheduler.SequentialLR(opt, [s1, s2], milestones=[8])]
    elif kind == "lambda":
        scheds = [tt.optim.lr_scheduler.LambdaLR(opt, lambda e: lr_at(e, 1.0))]

    def core(x, y):
        opt.zero_grad()
        loss = mse(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if kind == "float":
        def step(x, y, lr):
            opt.param_groups[0]["lr"] = lr
            return core(x, y)
    elif kind == "int_math":
        def step(x, y, i):
            opt.param_groups[0]["lr"] = lr_at(i, base)
            return core(x, y)
    elif kind == "int_np":
        def step(x, y, i):
            w = np.minimum(1.0, (i + 1) / 8.0)
            c = 0.5 * (1 + np.cos(np.pi * np.maximum(i - 8, 0) / 32.0))
            opt.param_groups[0]["lr"] = base * w * c
            return core(x, y)
    else:
        def step(x, y):
            loss = core(x, y)
            scheds[0].step()
            return loss

    def drive(i, fn):
        x, y = batch(i)
        if kind == "float":
            return fn(x, y, lr_at(i, base))
        if kind.startswith("int"):
            return fn(x, y, i)
        return fn(x, y)

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], scheds=scheds)


# ----- L: curriculum


def b_curric(kind, okind, dtype):
    model = mlp(dtype)
    opt = make_opt(okind, model.parameters())

    def step(x, y):
        opt.zero_grad()
        h = model(x)
        if h.ndim == 3:
            h = h.mean(axis=1)
        loss = mse(h, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    def drive(i, fn):
        phase = (i >= 30) + (i >= 60)
        n = (4, 6, 8)[phase] if kind in ("batch", "both") else 4
        t = (2, 3, 5)[phase] if kind in ("seq", "both") else None
        x, y = batch(i, n=n, t=t)
        return fn(x, y)

    return ctx(step=step, drive=drive, modules=[model], opts=[opt])


# ----- M: dropout changed mid-run


def b_dropout(kind, okind, dtype):
    model = mlp(dtype, drop=0.5)
    opt = make_opt(okind, model.parameters())
    S = SimpleNamespace(p=0.5)

    def step(x, y):
        opt.zero_grad()
        if kind == "functional":
            h = nn.functional.dropout(model[1](model[0](x)), p=S.p, training=model.training)
            out = model[3](h)
        else:
            out = model(x)
        loss = mse(out, y)
        loss.backward()
        opt.step()
        return loss

    def drive(i, fn):
        if i == 15:
            model[2].p = 0.1
            S.p = 0.1
        if kind == "eval" and i == 25:
            model.eval()
        if kind == "eval" and i == 32:
            model.train()
        if i == 28:
            model[2].p = 0.0
            S.p = 0.0
        x, y = batch(i)
        return fn(x, y)

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], state=S)


# ----- N: freezing / unfreezing


def b_freeze(stn, okind, dtype):
    model = mlp(dtype)
    opt = make_opt(okind, model.parameters())

    def step(x, y):
        opt.zero_grad(set_to_none=stn)
        loss = mse(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def drive(i, fn):
        if i == 12:
            for p in model[0].parameters():
                p.requires_grad_(False)
        if i == 26:
            for p in model[0].parameters():
                p.requires_grad_(True)
        x, y = batch(i)
        return fn(x, y)

    return ctx(step=step, drive=drive, modules=[model], opts=[opt])


# ----- O: swapping optimizers


def b_swap(kind, stn, dtype):
    model = mlp(dtype)
    params = list(model.parameters())
    opts = {"sgd": make_opt("sgd", params), "adam": make_opt("adam", params)}
    S = SimpleNamespace(opt=opts["sgd"], which="sgd")

    def step(x, y):
        o = S.opt if kind == "attr" else opts[S.which]
        o.zero_grad(set_to_none=stn)
        loss = mse(model(x), y)
        loss.backward()
        o.step()
        return loss

    def drive(i, fn):
        if i == 14:
            S.opt, S.which = opts["adam"], "adam"
        if i == 28:
            S.opt, S.which = opts["sgd"], "sgd"
        x, y = batch(i)
        return fn(x, y)

    return ctx(step=step, drive=drive, modules=[model], opts=list(opts.values()),
               state=S.which)


# ----- P: zero_grad variants


def b_zero(kind, okind, dtype):
    model = mlp(dtype)
    opt = make_opt(okind, model.parameters(), lr=0.01)

    def step(x, y):
        if kind == "opt_none":
            opt.zero_grad(set_to_none=True)
        elif kind == "opt_zeros":
            opt.zero_grad(set_to_none=False)
        elif kind == "module":
            model.zero_grad()
        loss = mse(model(x), y)
        loss.backward()
        opt.step()
        if kind == "end":
            opt.zero_grad(set_to_none=False)
        return loss

    def drive(i, fn):
        x, y = batch(i)
        return fn(x, y)

    return ctx(step=step, drive=drive, modules=[model], opts=[opt])


# ----- Q: writes and draws before a value guard that fails midway


def b_rollback(kind, okind, stn):
    if kind == "bn":
        model = nn.Sequential(nn.Linear(3, 4, rng=0), nn.BatchNorm1d(4), nn.Tanh(),
                              nn.Linear(4, 2, rng=1))
    else:
        model = mlp(F32, drop=0.3 if kind == "dropout" else None)
    opt = make_opt(okind, model.parameters())
    calls = tt.tensor(np.array(0.0))
    skipped = tt.tensor(np.array(0.0))

    def step(x, y):
        opt.zero_grad(set_to_none=stn)
        if kind == "count":
            with tt.no_grad():
                calls.add_(1.0)
        loss = mse(model(x), y)
        if not bool(tt.isfinite(loss)):
            with tt.no_grad():
                skipped.add_(1.0)
            return None
        loss.backward()
        opt.step()
        return loss

    def drive(i, fn):
        x, y = batch(i, big=OVERFLOW, dtype=F32)
        return fn(x, y)

    return ctx(step=step, drive=drive, modules=[model], opts=[opt], tensors=[calls, skipped])


# ----- the cases

DT = {"f16": F16, "f32": F32, "f64": F64}
CASES = []


def add(name, build, variant, n, refusal_ok=False, max_programs=None, xfail=None):
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    CASES.append(pytest.param(build, variant, n, refusal_ok, max_programs, id=name, marks=marks))


XF = {}  # case name -> "class: what differs"
for _stn in (0, 1):
    for _k in (2, 3):
        XF[f"accum-tensor-stn{_stn}-k{_k}"] = (
            "guard-rollback: a counter Tensor add_()-ed inside and read by .item() later in the "
            "same call is not put back when that guard fails midway: 1, 3, 6, 10 instead of 1, 2, 3, 4")
XF_WRITTEN, XF = XF, {}    # fixed since: a Tensor f writes in place is put back when a guard fails

for holder in ("attr", "dict", "np0d", "tensor", "arg_float", "arg_np64", "arg_0d", "arg_tensor"):
    for dn in ("f16", "f32", "f64"):
        for ok in (("sgd", "adam") if dn != "f64" else ("adam",)):
            nm = f"ls_split-{holder}-{dn}-{ok}"
            add(nm, b_ls_split, (holder, DT[dn], ok), 30, refusal_ok=holder == "arg_0d",
                max_programs=1 if holder.startswith("arg") or holder == "tensor" else None,
                xfail=XF.get(nm))

for holder in ("attr", "dict", "np0d", "tensor"):
    for dn in ("f16", "f32", "f64"):
        nm = f"ls_whole_branch-{holder}-{dn}"
        add(nm, b_ls_whole_branch, (holder, DT[dn]), 30, refusal_ok=True, xfail=XF.get(nm))

for holder in ("attr", "dict", "np0d", "tensor"):
    for dn in ("f16", "f32", "f64"):
        for ok in ("sgd", "adam"):
            nm = f"ls_lossguard-{holder}-{dn}-{ok}"
            add(nm, b_ls_whole_lossguard, (holder, DT[dn], ok), 30,
                refusal_ok=holder in ("attr", "dict", "np0d"),
                max_programs=8 if holder == "tensor" else None, xfail=XF.get(nm))

for kind in ("norm", "value", "numpy", "pybranch"):
    for ok in ("sgd", "adam", "rmsprop"):
        for dn in ("f32",):
            nm = f"clip-{kind}-{ok}-{dn}"
            add(nm, b_clip, (kind, ok, DT[dn]), 30, refusal_ok=kind == "pybranch",
                max_programs=1 if kind != "pybranch" else None, xfail=XF.get(nm))

for kind in ("outside", "outside_probe", "inside_zg_first_true", "inside_zg_first_false",
             "inside_zg_after", "inside_item"):
    for ok in ("sgd", "adam"):
        for dn in ("f32",):
            nm = f"nan-{kind}-{ok}-{dn}"
            add(nm, b_nan, (kind, ok, DT[dn]), 30,
                max_programs=None if kind == "inside_item" else 3, xfail=XF.get(nm))

for kind in ("outside", "arg", "inside"):
    for ok in ("sgd", "adam", "adamw"):
        for dn in ("f32",):
            nm = f"spike-{kind}-{ok}-{dn}"
            add(nm, b_spike, (kind, ok, DT[dn]), 30, refusal_ok=kind == "inside",
                max_programs=1 if kind == "arg" else None, xfail=XF.get(nm))

for kind in ("outside", "inside", "arg"):
    for ok in ("sgd", "adam"):
        for dn in ("f32",):
            nm = f"plateau-{kind}-{ok}-{dn}"
            add(nm, b_plateau, (kind, ok, DT[dn]), 30, refusal_ok=kind == "inside",
                max_programs=1 if kind == "outside" else None, xfail=XF.get(nm))

for kind in ("outside", "outside_named", "inside", "tensor"):
    for ok in ("sgd", "adam"):
        for dn in ("f32",):
            nm = f"early-{kind}-{ok}-{dn}"
            add(nm, b_early, (kind, ok, DT[dn]), 40, refusal_ok=kind == "inside",
                max_programs=1 if kind in ("outside", "tensor") else None, xfail=XF.get(nm))

for kind in ("attr", "tensor", "int", "0d", "bool"):
    for stn in (True, False):
        for k in (2, 3):
            nm = f"accum-{kind}-stn{int(stn)}-k{k}"
            add(nm, b_accum, (kind, stn, k), 30, refusal_ok=kind == "attr",
                max_programs={"0d": 3, "bool": 3}.get(kind), xfail=XF.get(nm))
# ("tensor": int(cnt.item()) is a guard on the counter's value, which changes every call: a
# program per value up to the limit, then eager, as the guide says; equal to eager throughout)

for kind in ("int", "float", "tensor", "attr"):
    for ok in ("sgd", "adam"):
        for dn in ("f32",):
            nm = f"ema-{kind}-{ok}-{dn}"
            add(nm, b_ema, (kind, ok, DT[dn]), 30,
                max_programs={"float": 1, "tensor": 1}.get(kind), xfail=XF.get(nm))

for kind in ("float", "sequential", "lambda", "int_math", "int_np"):
    for ok in ("sgd", "adam"):
        for dn in ("f32",):
            nm = f"warmcos-{kind}-{ok}-{dn}"
            add(nm, b_warmcos, (kind, ok, DT[dn]), 30,
                max_programs={"float": 1, "sequential": 1, "lambda": 1, "int_np": 1}.get(kind),
                xfail=XF.get(nm))

for kind in ("seq", "batch", "both"):
    for ok in ("sgd", "adam"):
        for dn in ("f32",):
            nm = f"curric-{kind}-{ok}-{dn}"
            add(nm, b_curric, (kind, ok, DT[dn]), 64, max_programs=3, xfail=XF.get(nm))

for kind in ("module", "eval", "functional"):
    for ok in ("sgd", "adam"):
        for dn in ("f32",):
            nm = f"dropout-{kind}-{ok}-{dn}"
            add(nm, b_dropout, (kind, ok, DT[dn]), 30, max_programs=6, xfail=XF.get(nm))

for stn in (True, False):
    for ok in ("sgd", "adam", "adamw"):
        for dn in ("f32", "f64"):
            nm = f"freeze-stn{int(stn)}-{ok}-{dn}"
            add(nm, b_freeze, (stn, ok, DT[dn]), 30, max_programs=3, xfail=XF.get(nm))

for kind in ("attr", "dictkey"):
    for stn in (True, False):
        for dn in ("f32", "f64"):
            nm = f"swap-{kind}-stn{int(stn)}-{dn}"
            add(nm, b_swap, (kind, stn, DT[dn]), 30, max_programs=3, xfail=XF.get(nm))

for kind in ("opt_none", "opt_zeros", "module", "end", "none"):
    for ok in ("sgd", "adam"):
        for dn in ("f32", "f16"):
            nm = f"zero-{kind}-{ok}-{dn}"
            add(nm, b_zero, (kind, ok, DT[dn]), 30, max_programs=2, xfail=XF.get(nm))

for kind in ("count", "dropout", "bn"):
    for ok in ("sgd", "adam"):
        for stn in (True, False):
            nm = f"rollback-{kind}-{ok}-stn{int(stn)}"
            add(nm, b_rollback, (kind, ok, stn), 30, max_programs=3, xfail=XF.get(nm))


@pytest.mark.parametrize("build, variant, n, refusal_ok, max_programs", CASES)
def test_compiled_loop_matches_eager(build, variant, n, refusal_ok, max_programs):
    check(build, variant, n, refusal_ok, max_programs)
