"""Round 39a: several compiled functions and compile's own options working together.

Written by a fresh user who knows torch.compile and jax.jit, from docs/guides/compile.md and
`tt.compile.__doc__` only (no implementation, no other tests were read). Every case builds an
eager world and a compiled world independently (same seed, separate objects), runs the eager
world twice to prove determinism, then compares every call (12 or 42 calls) bit for bit:
outputs, parameters, gradients, buffers, optimizer state dicts, scheduler learning rates, and
the exception type where eager raises.

234 cases: 234 pass, 0 strict xfails.

test_compile_vs_eager covers, under plain compile and (for a subset) check=True, fuse=True and
cache_size=2: a compiled train step and a compiled eval step alternating on one model (every
optimizer, Dropout, BatchNorm, eval every call or every 3rd); two compiled steps sharing a model
and optimizer; an EMA written by one compiled function and read by another; two compiled
functions reading a closed-over dict changed on the 3rd, 10th and 40th call; compiled functions
calling each other (plain, under tt.grad, twice); the same function compiled twice with
different options; the recompile limit (a number used in a branch, range, slice, 42 calls);
tt.compile.disable() toggled between calls; decorator forms (plain, with options, partials);
a Module holding a compiled method, a compiled Module and its forward, deepcopy and pickle;
compiled methods per instance and on the class; a shared Generator and the global generator;
in-place writer and value-guarded reader; BatchNorm train/eval flips; a scheduler stepped
inside its own compiled function. test_recompiles_counted_and_limit_warns checks the warning
after the limit.

Strict xfails: none (no difference from eager was found in this round).
"""
import copy
import functools
import pickle
import struct
import warnings

import numpy as np
import pytest

import tinytensor as tt

nn = tt.nn
F = tt.nn.functional


def _snap(v):
    if isinstance(v, tt.Tensor):
        a = np.asarray(v.data)
        g = None if v.grad is None else _snap(v.grad)
        return ("T", a.dtype.str, a.shape, a.tobytes(), bool(v.requires_grad), g)
    if isinstance(v, np.ndarray):
        return ("A", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, np.generic):
        return ("S", type(v).__name__, np.asarray(v).tobytes())
    if isinstance(v, bool) or v is None or isinstance(v, (str, int)):
        return (type(v).__name__, v)
    if isinstance(v, float):
        return ("f", struct.pack("<d", v))
    if isinstance(v, dict):
        return ("D", type(v).__name__, tuple((k, _snap(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, tuple(_snap(x) for x in v))
    raise TypeError(type(v))


def _state(model=None, opt=None, extra=()):
    out = []
    if model is not None:
        for n, p in model.named_parameters():
            out.append((n, _snap(p)))
        for n, b in model.named_buffers():
            out.append((n, _snap(b)))
    if opt is not None:
        sd = opt.state_dict()
        for k, st in sd["state"].items():
            out.append((k, _snap(dict(st))))
        out.append(_snap([{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]]))
    for e in extra:
        out.append(_snap(e))
    return out


def _mlp(seed=0, drop=False, bn=False):
    layers = [nn.Linear(4, 8, rng=seed)]
    if bn:
        layers.append(nn.BatchNorm1d(8))
    layers.append(nn.Tanh())
    if drop:
        layers.append(nn.Dropout(0.3))
    layers.append(nn.Linear(8, 3, rng=seed + 1))
    return nn.Sequential(*layers)


def _data(i, n=6):
    r = np.random.default_rng(1000 + i)
    return r.standard_normal((n, 4)), r.integers(0, 3, n)


def _run_world(builder, comp, ncalls):
    tt.manual_seed(123)
    run = builder(comp)
    log = []
    for i in range(ncalls):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = run(i)
            log.append(("ok", _snap(res)))
        except Exception as e:  # noqa: BLE001
            log.append(("err", type(e).__name__))
    return log


def _eager(f=None, **kw):
    if f is None:
        return lambda g: g
    return f


def _check(builder, comp, ncalls):
    e1 = _run_world(builder, _eager, ncalls)
    e2 = _run_world(builder, _eager, ncalls)
    assert e1 == e2, "eager world not deterministic"
    c = _run_world(builder, comp, ncalls)
    for i, (a, b) in enumerate(zip(e1, c)):
        assert a == b, f"call {i}: eager {str(a)[:300]} != compiled {str(b)[:300]}"


# ---------------------------------------------------------------- builders

OPTS = {
    "sgd": lambda ps: tt.optim.SGD(ps, lr=0.05),
    "mom": lambda ps: tt.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: tt.optim.Adam(ps, lr=0.01),
    "adamw": lambda ps: tt.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
}


def b_train_eval(opt_name, drop, bn, every):
    def builder(comp):
        model = _mlp(drop=drop, bn=bn)
        opt = OPTS[opt_name](model.parameters())
        lf = nn.CrossEntropyLoss()

        @comp
        def train_step(x, y):
            opt.zero_grad()
            loss = lf(model(x), y)
            loss.backward()
            opt.step()
            return loss

        @comp
        def eval_step(x):
            with tt.no_grad():
                return model(x)

        def run(i):
            x, y = _data(i)
            model.train()
            loss = train_step(x, y)
            out = None
            if i % every == 0:
                model.eval()
                out = eval_step(x)
                model.train()
            return [loss, out, _state(model, opt)]
        return run
    return builder


def b_two_steps_alternate(opt_name):
    # two compiled steps on two halves of the same model, alternating
    def builder(comp):
        model = _mlp()
        opt = OPTS[opt_name](model.parameters())
        lf = nn.CrossEntropyLoss()

        @comp
        def step_a(x, y):
            opt.zero_grad()
            loss = lf(model(x), y)
            loss.backward()
            opt.step()
            return loss

        @comp
        def step_b(x, y, lr):
            model.zero_grad()
            loss = lf(model(x), y) * 0.5
            loss.backward()
            with tt.no_grad():
                for p in model.parameters():
                    p -= lr * p.grad
            return loss

        def run(i):
            x, y = _data(i)
            if i % 3 == 2:
                loss = step_b(x, y, 0.01 * (1 + i % 4))
            else:
                loss = step_a(x, y)
            return [loss, _state(model, opt)]
        return run
    return builder


def b_ema(decay):
    def builder(comp):
        model = _mlp()
        opt = OPTS["mom"](model.parameters())
        lf = nn.CrossEntropyLoss()
        ema = [tt.tensor(p.data.copy()) for p in model.parameters()]

        @comp
        def train_step(x, y):
            opt.zero_grad()
            loss = lf(model(x), y)
            loss.backward()
            opt.step()
            return loss

        @comp
        def update_ema(d):
            with tt.no_grad():
                for e, p in zip(ema, model.parameters()):
                    e.mul_(d).add_(p * (1 - d))

        @comp
        def ema_eval(x):
            w1, b1, w2, b2 = ema
            return tt.linear(tt.tanh(tt.linear(x, w1, b1)), w2, b2)

        def run(i):
            x, y = _data(i)
            loss = train_step(x, y)
            update_ema(decay)
            out = ema_eval(x) if i % 2 else None
            return [loss, out, _state(model, opt, ema)]
        return run
    return builder


def b_shared_dict(change_at):
    def builder(comp):
        cfg = {"scale": 1.0, "act": "tanh"}
        W = tt.tensor(np.random.default_rng(5).standard_normal((4, 3)))

        @comp
        def f1(x):
            h = tt.dot(x, W) * cfg["scale"]
            return tt.tanh(h) if cfg["act"] == "tanh" else tt.relu(h)

        @comp
        def f2(x):
            cfg_s = cfg["scale"]
            return tt.sum(tt.square(tt.dot(x, W))) / cfg_s

        def run(i):
            if i in change_at:
                cfg["scale"] = cfg["scale"] * 1.5
                cfg["act"] = "relu" if cfg["act"] == "tanh" else "tanh"
            x, _ = _data(i)
            return [f1(x), f2(x)]
        return run
    return builder


def b_nested(kind):
    def builder(comp):
        W = tt.tensor(np.random.default_rng(7).standard_normal((4, 3)), requires_grad=True)

        @comp
        def inner(x, s):
            return tt.tanh(tt.dot(x, W)) * s

        if kind == "call":
            @comp
            def outer(x, s):
                return tt.sum(inner(x, s) ** 2)
        elif kind == "grad":
            @comp
            def outer(x, s):
                return tt.grad(lambda xx: tt.sum(inner(xx, s) ** 2))(x)
        else:
            @comp
            def outer(x, s):
                return inner(x, s) + inner(x * 2, s)

        def run(i):
            x, _ = _data(i)
            s = 0.5 + 0.25 * (i % 3)
            a = outer(x, s)
            b = inner(x, s)
            W.grad = None
            if isinstance(a, tt.Tensor) and a.requires_grad:
                tt.sum(a).backward()
            return [a, b, W]
        return run
    return builder


def b_same_fn_two_options(opts_a, opts_b):
    def builder(comp):
        model = _mlp()

        def f(x):
            return tt.sum(model(x) ** 2)

        if comp is _eager:
            fa = fb = f
        else:
            fa = tt.compile(f, **opts_a)
            fb = tt.compile(f, **opts_b)

        def run(i):
            x, _ = _data(i)
            model.zero_grad()
            la = fa(x)
            lb = fb(x * 0.5)
            (la + lb).backward()
            with tt.no_grad():
                for p in model.parameters():
                    p -= 0.01 * p.grad
            return [la, lb, _state(model)]
        return run
    return builder


def b_recompile_limit(kind):
    def builder(comp):
        W = tt.tensor(np.random.default_rng(9).standard_normal((4, 3)))

        @comp
        def f(x, n):
            if kind == "branch":
                return tt.tanh(tt.dot(x, W)) * n if n > 3 else tt.dot(x, W) - n
            if kind == "range":
                h = tt.dot(x, W)
                for _ in range(n % 11):
                    h = tt.tanh(h)
                return h
            return tt.sum(tt.dot(x, W)[: (n % 5) + 1])

        def run(i):
            x, _ = _data(i)
            return f(x, i)
        return run
    return builder


def b_disable_toggle(toggle_at):
    def builder(comp):
        model = _mlp(drop=True)
        opt = OPTS["adam"](model.parameters())
        lf = nn.CrossEntropyLoss()

        @comp
        def step(x, y):
            opt.zero_grad()
            loss = lf(model(x), y)
            loss.backward()
            opt.step()
            return loss

        def run(i):
            if i in toggle_at:
                tt.compile.disable(True)
            try:
                x, y = _data(i)
                loss = step(x, y)
            finally:
                tt.compile.disable(False)
            return [loss, _state(model, opt)]
        return run
    return builder


def b_decorator(form):
    def builder(comp):
        W = tt.tensor(np.random.default_rng(3).standard_normal((4, 3)), requires_grad=True)
        base = lambda x, s: tt.sum(tt.tanh(tt.dot(x, W)) * s)  # noqa: E731
        if comp is _eager:
            fn = functools.partial(base, s=0.75) if form.startswith("partial") else base
        elif form == "plain":
            fn = tt.compile(base)
        elif form == "check":
            fn = tt.compile(check=True)(base)
        elif form == "fuse":
            fn = tt.compile(fuse=True)(base)
        elif form == "cache1":
            fn = tt.compile(cache_size=1)(base)
        elif form == "partial":
            fn = tt.compile(functools.partial(base, s=0.75))
        elif form == "partial_of_compiled":
            fn = functools.partial(tt.compile(base), s=0.75)
        else:
            raise ValueError(form)

        def run(i):
            x, _ = _data(i, n=6 + (i % 3 == 0))
            W.grad = None
            if form.startswith("partial"):
                out = fn(x)
            else:
                out = fn(x, 0.5 + i % 4)
            out.backward()
            return [out, W]
        return run
    return builder


class _Net(nn.Module):
    def __init__(self, comp):
        super().__init__()
        self.l1 = nn.Linear(4, 8, rng=0)
        self.l2 = nn.Linear(8, 3, rng=1)
        self.scale = 1.0
        self._comp = comp
        self.fwd = comp(self._fwd)

    def _fwd(self, x):
        return self.l2(tt.tanh(self.l1(x))) * self.scale

    def forward(self, x):
        return self.fwd(x)


def b_module(form, change_at):
    def builder(comp):
        if form == "holds_compiled":
            net = _Net(comp)
            call = net
        elif form == "module":
            net = _Net(_eager)
            call = comp(net)
        elif form == "forward":
            net = _Net(_eager)
            call = comp(net.forward)
        elif form == "deepcopy":
            net0 = _Net(comp)
            net0(np.zeros((2, 4)))
            net = copy.deepcopy(net0)
            call = net
        elif form == "pickle":
            net0 = _Net(_eager)
            net = pickle.loads(pickle.dumps(net0))
            call = comp(net)
        else:
            raise ValueError(form)
        opt = OPTS["sgd"](net.parameters())

        def run(i):
            if i in change_at:
                net.scale = net.scale * 0.5
                net.train(not net.training)
            x, y = _data(i)
            opt.zero_grad()
            out = call(x)
            F.cross_entropy(out, y).backward()
            opt.step()
            return [out, _state(net, opt)]
        return run
    return builder


class _Holder:
    def __init__(self, comp, k):
        self.W = tt.tensor(np.random.default_rng(k).standard_normal((4, 3)))
        self.k = float(k)
        self.f = comp(self.g)

    def g(self, x):
        return tt.tanh(tt.dot(x, self.W)) * self.k


class _Meth:
    def __init__(self, k):
        self.W = tt.tensor(np.random.default_rng(k).standard_normal((4, 3)))
        self.k = float(k)


def b_methods(form):
    def builder(comp):
        if form == "two_instances":
            a, b = _Holder(comp, 1), _Holder(comp, 2)

            def run(i):
                x, _ = _data(i)
                if i % 5 == 3:
                    a.k, b.k = b.k, a.k
                return [a.f(x), b.f(x)]
            return run
        # method decorator on the class
        cls = type("M", (_Meth,), {"g": comp(lambda self, x: tt.tanh(tt.dot(x, self.W)) * self.k)})
        a, b = cls(1), cls(2)

        def run(i):
            x, _ = _data(i)
            if i in (2, 9):
                a.k = a.k + 1.0
            return [a.g(x), b.g(x)]
        return run
    return builder


def b_shared_generator(kind):
    def builder(comp):
        model = _mlp(drop=True)
        lf = nn.CrossEntropyLoss()
        opt = OPTS["sgd"](model.parameters())
        gen = np.random.default_rng(77)

        @comp
        def step(x, y):
            opt.zero_grad()
            loss = lf(model(x), y)
            loss.backward()
            opt.step()
            return loss

        @comp
        def noise(x, rng):
            return x + tt.randn(*x.shape, rng=rng)

        @comp
        def noise_global(x):
            return x * tt.rand(*x.shape)

        def run(i):
            x, y = _data(i)
            if kind == "gen":
                xn = noise(x, gen)
            else:
                xn = noise_global(x)
            loss = step(xn, y)
            return [xn, loss, _state(model, opt)]
        return run
    return builder


def b_writer_reader(kind):
    # one compiled function writes a buffer/tensor in place, another reads it
    def builder(comp):
        buf = tt.zeros(4)
        cnt = tt.zeros(())
        W = tt.tensor(np.random.default_rng(11).standard_normal((4, 3)))

        @comp
        def writer(x):
            with tt.no_grad():
                buf.mul_(0.9).add_(tt.mean(x, axis=0) * 0.1)
                cnt.add_(1.0)

        @comp
        def reader(x):
            if kind == "value":
                return tt.dot(x - buf, W)
            if kind == "item":
                return tt.dot(x, W) * (2.0 if float(cnt) > 4 else 1.0)
            return tt.dot(x, W) / (cnt + 1)

        def run(i):
            x, _ = _data(i)
            writer(x)
            return [reader(x), buf, cnt]
        return run
    return builder


def b_bn_modes(opt_name, every):
    def builder(comp):
        model = _mlp(bn=True, drop=True)
        opt = OPTS[opt_name](model.parameters())
        lf = nn.CrossEntropyLoss()

        @comp
        def fwd(x):
            return model(x)

        def run(i):
            x, y = _data(i)
            model.train(i % every != 0)
            out = fwd(x)
            if model.training:
                opt.zero_grad()
                lf(out, y).backward()
                opt.step()
            return [out, _state(model, opt)]
        return run
    return builder


def b_sched_shared(kind):
    def builder(comp):
        model = _mlp()
        opt = OPTS["mom"](model.parameters())
        sched = tt.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        lf = nn.CrossEntropyLoss()

        @comp
        def step(x, y):
            opt.zero_grad()
            loss = lf(model(x), y)
            loss.backward()
            opt.step()
            return loss

        @comp
        def sched_step():
            sched.step()

        def run(i):
            x, y = _data(i)
            loss = step(x, y)
            if kind == "compiled_sched":
                sched_step()
            else:
                sched.step()
            return [loss, _state(model, opt), sched.get_last_lr()]
        return run
    return builder


# ---------------------------------------------------------------- cases

def _comp_with(**kw):
    def comp(f=None):
        if f is None:
            return lambda g: tt.compile(g, **kw)
        return tt.compile(f, **kw)
    return comp


COMP = {"plain": tt.compile, "check": _comp_with(check=True), "fuse": _comp_with(fuse=True),
        "cache2": _comp_with(cache_size=2)}

CASES = []
for opt_name in OPTS:
    for drop, bn in [(False, False), (True, False), (False, True), (True, True)]:
        for every in (1, 3):
            CASES.append((f"train_eval-{opt_name}-d{int(drop)}-bn{int(bn)}-e{every}",
                          b_train_eval(opt_name, drop, bn, every), 12))
for opt_name in OPTS:
    CASES.append((f"two_steps-{opt_name}", b_two_steps_alternate(opt_name), 12))
for d in (0.9, 0.5):
    CASES.append((f"ema-{d}", b_ema(d), 12))
for ch in [(2,), (9,), (39,), (2, 9, 39)]:
    CASES.append((f"shared_dict-{'-'.join(map(str, ch))}", b_shared_dict(ch), 42))
for kind in ("call", "grad", "twice"):
    CASES.append((f"nested-{kind}", b_nested(kind), 12))
for name, oa, ob in [("plain_check", {}, {"check": True}), ("plain_fuse", {}, {"fuse": True}),
                     ("check_fuse", {"check": True}, {"fuse": True}),
                     ("cache1_plain", {"cache_size": 1}, {})]:
    CASES.append((f"two_options-{name}", b_same_fn_two_options(oa, ob), 12))
for kind in ("branch", "range", "slice"):
    CASES.append((f"recompile_limit-{kind}", b_recompile_limit(kind), 42))
for t in [(2,), (9,), (39,), (0, 1), (2, 3, 9, 10), tuple(range(0, 42, 2))]:
    CASES.append((f"disable-{'-'.join(map(str, t[:4]))}{'x' if len(t) > 4 else ''}",
                  b_disable_toggle(t), 42))
for form in ("plain", "check", "fuse", "cache1", "partial", "partial_of_compiled"):
    CASES.append((f"decorator-{form}", b_decorator(form), 12))
for form in ("holds_compiled", "module", "forward", "deepcopy", "pickle"):
    for ch in [(), (2,), (2, 9)]:
        CASES.append((f"module-{form}-{'-'.join(map(str, ch)) or 'none'}", b_module(form, ch), 12))
for form in ("two_instances", "class_method"):
    CASES.append((f"methods-{form}", b_methods(form), 12))
for kind in ("gen", "global"):
    CASES.append((f"shared_gen-{kind}", b_shared_generator(kind), 12))
for kind in ("value", "item", "div"):
    CASES.append((f"writer_reader-{kind}", b_writer_reader(kind), 12))
for opt_name in ("sgd", "adam"):
    for every in (2, 3):
        CASES.append((f"bn_modes-{opt_name}-{every}", b_bn_modes(opt_name, every), 12))
for kind in ("compiled_sched", "eager_sched"):
    CASES.append((f"sched-{kind}", b_sched_shared(kind), 12))

XFAIL = {}

PARAMS = []
for cname in COMP:
    for cid, builder, n in CASES:
        full = f"{cname}-{cid}"
        if cname != "plain" and not cid.startswith(("train_eval-adam", "two_steps", "ema", "nested",
                                                    "module", "writer", "shared_gen", "disable-2")):
            continue
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[full])] if full in XFAIL else []
        PARAMS.append(pytest.param(cname, builder, n, id=full, marks=marks))


@pytest.mark.parametrize("cname,builder,n", PARAMS)
def test_compile_vs_eager(cname, builder, n):
    _check(builder, COMP[cname], n)


def test_recompiles_counted_and_limit_warns():
    W = tt.tensor(np.ones((4, 3)))

    @tt.compile
    def f(x, n):
        return tt.dot(x, W) * n if n > 3 else tt.dot(x, W)

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for i in range(12):
            f(np.ones((2, 4)), i)
    assert len(f.recompiles) <= 9
    assert any("eager" in str(x.message).lower() or "limit" in str(x.message).lower() for x in w)
