"""Round 40a: init/load_state_dict lines, param_groups writes, logging/warnings, files, minibatches,
user primitives, hooks and numerical checkers inside tt.compile against eager, bit for bit.

115 cases: 107 pass, 8 strict xfails, one class:
- init on the global generator (nn.init.normal_/uniform_/xavier_uniform_/kaiming_normal_ with
  rng=None, weight and bias, 12 and 42 calls): compiled values differ from eager from call 0 (8).
Refusals observed and accepted: init with an np.random.Generator (drew past tinytensor), init on
a Tensor made inside f, g["lr"] *= 0.5 / g.update, a write after the step, a logging record
reaching a handler, f's own catch_warnings(record=True), tt.save/tt.load, minibatches over data
computed from arguments, a hook writing g.data.

Since fixed: the 8 (nn.init with rng=None inside f is refused, naming the fix).
"""

import copy
import logging
import struct
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn, optim

N = 12


def _canon(v):
    if isinstance(v, tt.Tensor):
        return ("T", _canon(v.numpy()), v.requires_grad)
    if isinstance(v, np.ndarray):
        return ("A", v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes())
    if isinstance(v, np.generic):
        return ("S", v.dtype.str, v.tobytes())
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return ("F", struct.pack("<d", v))
    if isinstance(v, dict):
        return {k: _canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_canon(x) for x in v]
    return repr(v)


def _snap_model(model, opt=None, sched=None):
    s = {"p": [(_canon(p.data), _canon(p.grad)) for p in model.parameters()]}
    s["sd"] = _canon({k: np.asarray(v.numpy() if isinstance(v, tt.Tensor) else v)
                      for k, v in model.state_dict().items()})
    if opt is not None:
        s["opt"] = _canon(opt.state_dict())
        s["lr"] = _canon([dict(g) | {"params": None} for g in opt.param_groups])
    if sched is not None:
        s["sched"] = _canon(sched.get_last_lr())
    return s


def _run(build, compiled, n):
    call, snap = build(compiled)
    out = []
    for i in range(n):
        try:
            r = ("ok", _canon(call(i)))
        except RuntimeError as e:
            if compiled and "tt.compile" in str(e):
                return out, ("refused", str(e)[:300])
            r = ("err", type(e).__name__)
        except Exception as e:  # noqa: BLE001
            r = ("err", type(e).__name__)
        out.append((r, snap()))
    return out, None


def _check(build, expect, n=N):
    e1, _ = _run(build, False, n)
    e2, _ = _run(build, False, n)
    assert e1 == e2, "eager not deterministic"
    c, refused = _run(build, True, n)
    if expect == "refused":
        assert refused is not None, "expected a refusal"
        return
    assert refused is None, refused
    for i, (a, b) in enumerate(zip(e1, c)):
        assert a == b, f"call {i} differs"
    assert len(c) == len(e1)


def _xf(build, expect, reason, n=N):
    return pytest.param(build, expect, n, marks=pytest.mark.xfail(strict=True, reason=reason))


def _model(seed=0):
    return nn.Linear(4, 3, rng=seed, dtype=np.float64)


def _data(i):
    r = np.random.default_rng(100 + i)
    return r.standard_normal((5, 4)), r.standard_normal((5, 3))


def _loss(m, x, y):
    return ((m(tt.tensor(x)) - tt.tensor(y)) ** 2).mean()


# ---------- 1: init and load_state_dict ----------

def b_init(kind, rng_kind, target="weight"):
    def build(compiled):
        m = _model()
        opt = optim.SGD(m.parameters(), lr=0.1)
        gen = np.random.default_rng(7)

        def rng_arg():
            return {"seed": 3, "gen": gen, "none": None}[rng_kind]

        def f(x, y):
            p = getattr(m, target)
            if kind == "normal":
                nn.init.normal_(p, std=0.1, rng=rng_arg())
            elif kind == "uniform":
                nn.init.uniform_(p, -0.2, 0.2, rng=rng_arg())
            elif kind == "xavier":
                nn.init.xavier_uniform_(p, rng=rng_arg())
            elif kind == "kaiming":
                nn.init.kaiming_normal_(p, rng=rng_arg())
            elif kind == "zeros":
                nn.init.zeros_(p)
            elif kind == "constant":
                nn.init.constant_(p, 0.3)
            opt.zero_grad()
            loss = _loss(m, x, y)
            loss.backward()
            opt.step()
            return loss

        g = tt.compile(f) if compiled else f

        def call(i):
            if rng_kind == "none":
                tt.manual_seed(11 + 0 * i) if i == 0 else None
            return g(*_data(i))
        if rng_kind == "none":
            tt.manual_seed(11)
        return call, lambda: (_snap_model(m, opt), _canon(gen.bit_generator.state["state"]))
    return build


def b_init_inside_tensor(kind):
    def build(compiled):
        def f(x):
            w = tt.zeros((4, 3))
            if kind == "normal":
                nn.init.normal_(w, rng=5)
            else:
                nn.init.constant_(w, 0.5)
            return tt.dot(tt.tensor(x), w)
        g = tt.compile(f) if compiled else f
        return (lambda i: g(_data(i)[0])), (lambda: None)
    return build


def b_lsd(mode, strict=True):
    def build(compiled):
        m = _model()
        opt = optim.Adam(m.parameters(), lr=0.01)
        held = {k: np.array(v.numpy() if isinstance(v, tt.Tensor) else v, copy=True)
                for k, v in _model(5).state_dict().items()}
        box = {"sd": held}
        if not strict:
            box["sd"] = {"weight": held["weight"]}

        def f(x, y):
            m.load_state_dict(box["sd"], strict=strict)
            opt.zero_grad()
            loss = _loss(m, x, y)
            loss.backward()
            opt.step()
            return loss

        g = tt.compile(f) if compiled else f

        def call(i):
            if i in (2, 9):
                if mode == "inplace":
                    box["sd"]["weight"] *= 1.5
                elif mode == "replace":
                    box["sd"] = {k: v * 2.0 for k, v in box["sd"].items()}
                elif mode == "addkey" and strict:
                    box["sd"] = dict(box["sd"])
            return g(*_data(i))
        return call, lambda: _snap_model(m, opt)
    return build


def b_opt_lsd(mode, kind="sgd"):
    def build(compiled):
        m = _model()
        if kind == "sgd":
            opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        else:
            opt = optim.Adam(m.parameters(), lr=0.01)
        held = copy.deepcopy(opt.state_dict())
        box = {"sd": held}

        def f(x, y):
            opt.load_state_dict(box["sd"])
            opt.zero_grad()
            loss = _loss(m, x, y)
            loss.backward()
            opt.step()
            return loss

        g = tt.compile(f) if compiled else f

        def call(i):
            if i in (2, 9):
                if mode == "inplace":
                    box["sd"]["param_groups"][0]["lr"] *= 0.5
                elif mode == "replace":
                    sd = copy.deepcopy(box["sd"])
                    sd["param_groups"][0]["lr"] = 0.03 + i * 0.001
                    box["sd"] = sd
            return g(*_data(i))
        return call, lambda: _snap_model(m, opt)
    return build


def b_sched_lsd(mode):
    def build(compiled):
        m = _model()
        opt = optim.SGD(m.parameters(), lr=0.1)
        sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        sched.step()
        box = {"sd": copy.deepcopy(sched.state_dict())}

        def f(x, y):
            sched.load_state_dict(box["sd"])
            opt.zero_grad()
            loss = _loss(m, x, y)
            loss.backward()
            opt.step()
            sched.step()
            return loss

        g = tt.compile(f) if compiled else f

        def call(i):
            if i in (2, 9) and mode == "inplace":
                box["sd"]["last_epoch"] = box["sd"]["last_epoch"] + 1
            if i in (2, 9) and mode == "replace":
                sd = copy.deepcopy(box["sd"])
                sd["gamma"] = 0.25
                box["sd"] = sd
            return g(*_data(i))
        return call, lambda: _snap_model(m, opt, sched)
    return build


# ---------- 2: param_groups writes ----------

def b_pg(how):
    def build(compiled):
        m = _model()
        opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.5)

        def f(x, y, lr):
            grp = opt.param_groups[0]
            if how == "halve":
                grp["lr"] *= 0.5
            elif how == "update":
                grp.update(lr=grp["lr"] * 0.9)
            elif how == "arg":
                grp["lr"] = lr
            elif how == "arg_scaled":
                grp["lr"] = lr * 0.5
            elif how == "const":
                grp["lr"] = 0.05
            elif how == "const_mom":
                grp["momentum"] = 0.5
            elif how == "update_const":
                grp.update(lr=0.05, momentum=0.5)
            elif how == "after":
                pass
            opt.zero_grad()
            loss = _loss(m, x, y)
            loss.backward()
            opt.step()
            if how == "after":
                grp["lr"] = lr
            return loss

        g = tt.compile(f) if compiled else f
        return (lambda i: g(*_data(i), 0.1 / (1 + i))), lambda: _snap_model(m, opt)
    return build


# ---------- 3: logging and warnings ----------

def b_log(how):
    def build(compiled):
        lg = logging.getLogger(f"r40a.{how}.{compiled}.{id(object())}")
        lg.propagate = False
        recs = []

        class H(logging.Handler):
            def emit(self, r):
                recs.append(r.getMessage())
        if how in ("handler", "enabled_handler"):
            lg.addHandler(H())
        lg.setLevel(logging.WARNING)

        def f(x):
            y = tt.tensor(x) * 2
            if lg.isEnabledFor(logging.DEBUG):
                y = y + 1
            if how in ("handler", "debug_nohandler"):
                lg.warning("hi")
            if how == "debug_filtered":
                lg.debug("x")
            return y

        g = tt.compile(f) if compiled else f

        def call(i):
            if i == 3 and how in ("setlevel", "enabled_handler"):
                lg.setLevel(logging.DEBUG)
            if i == 7 and how == "setlevel":
                lg.setLevel(logging.ERROR)
            return g(_data(i)[0])
        return call, lambda: list(recs)
    return build


def b_warn(how):
    def build(compiled):
        def f(x):
            y = tt.tensor(x) * 3
            if how == "user":
                warnings.warn("careful", UserWarning, stacklevel=2)
            elif how == "runtime":
                warnings.warn("rt", RuntimeWarning, stacklevel=2)
            elif how == "inner_record":
                with warnings.catch_warnings(record=True):
                    warnings.simplefilter("always")
                    y = y + 1
            return y

        g = tt.compile(f) if compiled else f

        def call(i):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = g(_data(i)[0])
            return [r, [(type(x.message).__name__, str(x.message)) for x in w]]
        return call, lambda: None
    return build


# ---------- 4: files, minibatches ----------

def b_file(how, tmp):
    def build(compiled):
        path = str(tmp / f"w{compiled}.npz")
        tt.save({"a": np.ones(3)}, path)

        def f(x):
            if how == "save":
                tt.save({"a": x}, path)
                return tt.tensor(x)
            d = tt.load(path)
            return tt.tensor(x) + np.asarray(d["a"] if isinstance(d, dict) else d)
        g = tt.compile(f) if compiled else f
        return (lambda i: g(np.full(3, float(i)))), (lambda: None)
    return build


def b_mb(how, shuffle):
    def build(compiled):
        held_x = np.arange(24.0).reshape(8, 3)
        held_y = np.arange(8.0)
        w = tt.tensor(np.linspace(0.1, 0.3, 3), requires_grad=True)

        def f(x):
            tot = tt.tensor(0.0)
            X = held_x if how == "held" else x * 2.0
            for xb, yb in tt.data.minibatches(X, held_y, batch_size=3, shuffle=shuffle,
                                              rng=4 if shuffle else None):
                tot = tot + (tt.dot(tt.tensor(xb), w) - tt.tensor(yb)).sum()
            return tot

        g = tt.compile(f) if compiled else f

        def call(i):
            if i in (2, 9):
                held_x[...] += 1.5
                held_y[0] = -i
            return g(np.ones((8, 3)) * i)
        return call, lambda: None
    return build


# ---------- 5: primitives, hooks ----------

_prim_count = [0]


def b_prim(what):
    def build(compiled):
        _prim_count[0] += 1
        p = tt.primitive(lambda x: x ** 3, name=f"r40a_cube_{what}_{_prim_count[0]}")
        p.defvjp(lambda g, ans, x: 3 * x ** 2 * g)
        p.defjvp(lambda t, ans, x: 3 * x ** 2 * t)

        def f(x):
            if what == "vjp":
                return tt.grad(lambda z: p(z).sum())(x)
            return tt.jvp(lambda z: p(z), (x,), (np.ones_like(x),))[1]

        g = tt.compile(f) if compiled else f

        def call(i):
            if i in (2, 9):
                if what == "vjp":
                    p.defvjp(lambda g_, ans, x, k=i: (k + 1.0) * x ** 2 * g_)
                else:
                    p.defjvp(lambda t, ans, x, k=i: (k + 1.0) * x ** 2 * t)
            return g(_data(i)[0][0])
        return call, lambda: None
    return build


def b_hook(how):
    def build(compiled):
        m = _model()
        opt = optim.SGD(m.parameters(), lr=0.1)
        box = {"s": 2.0}

        def hook(g):
            if how == "numpy":
                return g.numpy() * box["s"]
            if how == "mul_":
                with tt.no_grad():
                    g.mul_(box["s"])
                return None
            if how == "ret":
                return g * box["s"]
            g.data = g.data * box["s"]
            return None
        m.weight.register_hook(hook)

        def f(x, y):
            opt.zero_grad()
            loss = _loss(m, x, y)
            loss.backward()
            opt.step()
            return loss

        g = tt.compile(f) if compiled else f

        def call(i):
            if i in (2, 9):
                box["s"] = 0.5 + i
            return g(*_data(i))
        return call, lambda: _snap_model(m, opt)
    return build


# ---------- 6: numerical_grad and gradcheck ----------

def b_num(how):
    def build(compiled):
        box = {"c": np.array([1.0, 2.0, 3.0])}

        def fn(z):
            return (z * box["c"]).sum() ** 2 if isinstance(z, tt.Tensor) else \
                float((np.asarray(z) * box["c"]).sum() ** 2)

        def f(x):
            if how == "ng":
                return tt.numerical_grad(fn, x)
            try:
                return tt.gradcheck(lambda z: (tt.tensor(z) * box["c"]).sum() ** 2, x)
            except tt.GradcheckError:
                return "fail"

        g = tt.compile(f) if compiled else f

        def call(i):
            if i in (2, 9):
                box["c"] = box["c"] * 1.5
            if i == 5:
                box["c"][0] = -7.0
            return g(np.array([0.1, 0.2, 0.3]) * (i + 1))
        return call, lambda: None
    return build


CASES = []
for kind in ["normal", "uniform", "xavier", "kaiming", "zeros", "constant"]:
    for rk in ["seed", "gen", "none"]:
        if kind in ("zeros", "constant") and rk != "seed":
            continue
        # (fixed since: rng=None had drawn twice on the first call; a generator is refused, as
        # documented now, and an int seed is a line of the program)
        exp = "refused" if rk in ("gen", "none") else "same"
        CASES.append((f"init-{kind}-{rk}", b_init(kind, rk), exp))
        if kind not in ("xavier", "kaiming"):
            CASES.append((f"init-{kind}-{rk}-bias", b_init(kind, rk, "bias"), exp))
for kind in ["normal", "constant"]:
    CASES.append((f"init-inside-{kind}", b_init_inside_tensor(kind), "refused"))
for mode in ["none", "inplace", "replace"]:
    CASES.append((f"lsd-mod-{mode}", b_lsd(mode), "same"))
    CASES.append((f"lsd-mod-{mode}-nonstrict", b_lsd(mode, strict=False), "same"))
    for k in ["sgd", "adam"]:
        CASES.append((f"lsd-opt-{k}-{mode}", b_opt_lsd(mode, k), "same"))
    CASES.append((f"lsd-sched-{mode}", b_sched_lsd(mode), "same"))
for how in ["arg", "arg_scaled", "const", "const_mom", "update_const"]:
    CASES.append((f"pg-{how}", b_pg(how), "same"))
for how in ["halve", "update"]:
    CASES.append((f"pg-{how}", b_pg(how), "refused"))
CASES.append(("pg-after", b_pg("after"), "refused"))
for how in ["plain", "setlevel", "debug_filtered"]:
    CASES.append((f"log-{how}", b_log(how), "same"))
for how in ["handler", "debug_nohandler"]:
    CASES.append((f"log-{how}", b_log(how), "refused"))
for how in ["none", "user", "runtime"]:
    CASES.append((f"warn-{how}", b_warn(how), "same"))
CASES.append(("warn-inner_record", b_warn("inner_record"), "refused"))
for sh in [False, True]:
    CASES.append((f"mb-held-{sh}", b_mb("held", sh), "same"))
    CASES.append((f"mb-args-{sh}", b_mb("args", sh), "refused"))
for w in ["vjp", "jvp"]:
    CASES.append((f"prim-{w}", b_prim(w), "same"))
for how in ["numpy", "mul_", "ret"]:
    CASES.append((f"hook-{how}", b_hook(how), "same"))
CASES.append(("hook-gdata", b_hook("gdata"), "refused"))
for how in ["ng", "gc"]:
    CASES.append((f"num-{how}", b_num(how), "same"))

_R_NONE = ("nn.init.*_(p, rng=None) draws from the global generator: the compiled call's values "
           "differ from eager's from the first call")
XFAIL = {}   # (_R_NONE: fixed since, refused)


def _params():
    out = []
    for name, b, e in CASES:
        long_run = name.startswith(("init-normal", "lsd", "pg", "hook", "num", "prim", "mb", "warn"))
        for n in (N, 42) if long_run else (N,):
            if (name, n) in XFAIL:
                out.append(pytest.param(b, e, n, id=f"{name}-{n}", marks=pytest.mark.xfail(
                    strict=True, reason=XFAIL[(name, n)])))
            else:
                out.append(pytest.param(b, e, n, id=f"{name}-{n}"))
    return out


@pytest.mark.parametrize("build,expect,n", _params())
def test_round40a(build, expect, n):
    _check(build, expect, n)


@pytest.mark.parametrize("how", ["save", "load"])
def test_files_refused(how, tmp_path):
    _check(b_file(how, tmp_path), "refused", 3)
