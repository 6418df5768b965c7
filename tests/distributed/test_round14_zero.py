"""Round 14 (issue 32): a fresh user's attack on `tt.distributed.optim.ZeroRedundancyOptimizer` with DDP.

Every case launches `mpiexec -n 2` (a few `-n 3`) on a small script written to a temporary folder
(HARNESS: a 5-7-3 float64 MLP, 12-row global batches, every rank on rows `rank::world_size`; CASES:
the cases that need their own loop) and compares with one process running the plain optimizer at
the whole batch (`d1`, to 1e-15), with plain DDP on the same ranks (`dd`, bit for bit) and across
the replicas (`rep`). Outcomes: equal, refused (a clear error, or the job aborting with a message
naming the fault), hang (past the timeout), silent difference, crash. Cases that are neither equal
nor refused are `xfail(strict=True)` with a one-line repro. Fault cases run with a 3 s watchdog
(`TT_DIST_TIMEOUT`-like `init(timeout=)`) and a 30 s launch timeout: a hang fails the test.

Found at the time of writing (69 cases): 65 equal or refused/aborted with a message naming the fix;
4 silent differences (xfail): every rank scaling `p.data` in place (the one shared copy is scaled once
per rank), a parameter unfrozen after the wrap (never averaged), ranks passing different `lr=` (not
checked), and `state_dict()` after more steps than the last `consolidate_state_dict()` (stale, as
PyTorch's).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def find_mpiexec():
    here = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
    return here or shutil.which("mpiexec")


def _have_mpi():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return find_mpiexec() is not None


pytestmark = pytest.mark.skipif(not _have_mpi(),
                                reason='needs mpi4py and mpiexec: pip install -e ".[distributed]"')


HARNESS = r"""import contextlib
import json
import os
import sys

import numpy as np

import tinytensor as tt

dist = tt.distributed
dist.init(timeout=float(os.environ.get("ZT", "20")))
R, W = dist.rank(), dist.world_size()
ZRO = tt.distributed.optim.ZeroRedundancyOptimizer
DDP = tt.nn.parallel.DistributedDataParallel
B = 12
_rng = np.random.default_rng(7)
X = _rng.standard_normal((64 * B, 5))
Y = _rng.standard_normal((64 * B, 3))


def out(**kw):
    if R == 0:
        print("RESULT " + json.dumps(kw), flush=True)


class Net(tt.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        dt = cfg.get("dtype", np.float64)
        self.l1 = tt.nn.Linear(5, 7, rng=1, dtype=dt)
        if cfg.get("bn"):
            self.bn = tt.nn.BatchNorm1d(7, dtype=dt)
        self.act = tt.nn.Tanh()
        self.l2 = tt.nn.Linear(7, 3, rng=2, dtype=cfg.get("dtype2", dt))
        if cfg.get("unused") or cfg.get("alt"):
            self.extra = tt.nn.Linear(3, 3, rng=3, dtype=dt)
        if cfg.get("scalar"):
            self.s = tt.nn.Parameter(np.array(1.25, dtype=dt))
        self.calls = 0
        self.alt = cfg.get("alt")

    def forward(self, x):
        h = self.l1(x)
        if hasattr(self, "bn"):
            h = self.bn(h)
        o = self.l2(self.act(h))
        if hasattr(self, "s"):
            o = o * self.s
        if self.alt:
            self.calls += 1
        if self.alt and self.calls % 2 == 0:
            o = o + self.extra(o)
        return o


def make(cfg):
    m = Net(cfg)
    if cfg.get("frozen"):
        m.l1.bias.requires_grad = False
    if cfg.get("fortran"):
        m.l1.weight.data = np.asfortranarray(m.l1.weight.data)
        m.l2.weight.data = m.l2.weight.data.T.copy().T
    return m


def batch(i, shard, cfg):
    xb, yb = X[i * B:(i + 1) * B], Y[i * B:(i + 1) * B]
    if shard:
        xb, yb = xb[R::W], yb[R::W]
    dt = cfg.get("dtype", np.float64)
    return xb.astype(dt), yb.astype(cfg.get("dtype2", dt))


def pspec(cfg, m):
    g = cfg.get("groups")
    if g == "two":
        return [{"params": list(m.l1.parameters()), "lr": cfg["opt"][1].get("lr", 0.1) * 0.5},
                {"params": [p for n, p in m.named_parameters() if not n.startswith("l1.")]}]
    if g == "rev":
        return [{"params": list(m.l2.parameters()), "lr": 0.05},
                {"params": [p for n, p in m.named_parameters() if not n.startswith("l2.")][::-1]}]
    if g == "wd":
        return [{"params": [m.l1.weight, m.l2.weight], "weight_decay": 0.05},
                {"params": [p for n, p in m.named_parameters()
                            if n.endswith("bias") or n.startswith("extra")],
                 "weight_decay": 0.0}]
    return list(m.parameters())


SCHED = {
    "step": lambda o: tt.optim.lr_scheduler.StepLR(o, 2, gamma=0.5),
    "cos": lambda o: tt.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5),
    "onecycle": lambda o: tt.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=10),
}

HOOKS = {}


def hook(f):
    HOOKS[f.__name__] = f
    return f


@hook
def lr_outside(k, m, opt, ctx):
    if k == 1:
        for g in opt.param_groups:
            g["lr"] = 0.03


@hook
def grad_rebind(k, m, opt, ctx):
    for p in m.parameters():
        if p.grad is not None:
            p.grad = p.grad * 0.5


@hook
def data_inplace(k, m, opt, ctx):
    with tt.no_grad():
        for p in m.parameters():
            p.data *= 0.9


@hook
def data_rebind(k, m, opt, ctx):
    for p in m.parameters():
        p.data = p.data * 0.9


@hook
def hyper_outside(k, m, opt, ctx):
    if k == 1:
        opt.param_groups[0]["lr"] = 0.03
    if k == 2:
        opt.param_groups[0]["momentum"] = 0.5
        opt.param_groups[0]["weight_decay"] = 0.05


@hook
def unfreeze(k, m, opt, ctx):
    if k == 1:
        m.l1.bias.requires_grad = True


@hook
def double_step(k, m, opt, ctx):
    opt.step()


@hook
def read_grads(k, m, opt, ctx):
    ctx.setdefault("grads", []).append(np.concatenate([np.ravel(p.grad) for p in m.parameters()]))


@hook
def eval_rank0(k, m, opt, ctx):
    if not ctx["shard"] or R == 0:
        with tt.no_grad():
            m.eval()
            m(X[:4])
            m.train()


def loop(cfg, net, mod, opt, ddp, shard, ctx, steps=None, start=0):
    sched = SCHED[cfg["sched"]](opt) if cfg.get("sched") else None
    accum = cfg.get("accum", 1)
    ctx["shard"] = shard
    for k in range(start, start + (steps or cfg.get("steps", 5))):
        if cfg.get("pre0"):
            HOOKS[cfg["pre0"]](k, mod, opt, ctx)
        if cfg.get("nozero"):
            pass
        elif cfg.get("zero_none") is None:
            opt.zero_grad()
        else:
            opt.zero_grad(set_to_none=cfg["zero_none"])
        for a in range(accum):
            xb, yb = batch(k * accum + a, shard, cfg)
            c = contextlib.nullcontext()
            if ddp is not None and cfg.get("no_sync") and a < accum - 1:
                c = ddp.no_sync()
            with c:
                loss = ((net(xb) - yb) ** 2).mean() * (1.0 / accum)
                loss.backward()
        if cfg.get("pre"):
            HOOKS[cfg["pre"]](k, mod, opt, ctx)
        if cfg.get("clip"):
            tt.nn.utils.clip_grad_norm_(mod.parameters(), cfg["clip"])
        if cfg.get("clipv"):
            tt.nn.utils.clip_grad_value_(mod.parameters(), cfg["clipv"])
        opt.step()
        if cfg.get("post"):
            HOOKS[cfg["post"]](k, mod, opt, ctx)
        if sched:
            sched.step()
    return sched


def optim(cfg, params, zero):
    name, kw = cfg["opt"]
    cls = getattr(tt.optim, name)
    if zero:
        return ZRO(params, optimizer_class=cls, **cfg.get("zkw", {}), **kw)
    return cls(params, **kw)


def flat(m):
    a = [np.ravel(p.data).astype(np.float64) for p in m.parameters()]
    a += [np.ravel(b).astype(np.float64) for _, b in m.named_buffers()]
    return np.concatenate(a)


def flatp(m):
    return np.concatenate([np.ravel(p.data).astype(np.float64) for p in m.parameters()])


def run_dist(cfg, zero=True):
    m = make(cfg)
    ddp = DDP(m, **cfg.get("ddp", {})) if cfg.get("wrap", True) else None
    opt = optim(cfg, pspec(cfg, m), zero)
    ctx = {}
    if ddp is None:
        # bare module: the user averages the gradients
        def avg(k, mm, o, c):
            for p in mm.parameters():
                if p.grad is not None:
                    p.grad = dist.all_reduce(np.asarray(p.grad), op="mean")
        HOOKS["_avg"] = avg
        cfg = dict(cfg, pre="_avg")
    loop(cfg, ddp if ddp is not None else m, m, opt, ddp, True, ctx)
    return m, opt, ctx


def run_ref(cfg):
    m = make(cfg)
    opt = optim(cfg, pspec(cfg, m), False)
    ctx = {}
    loop(cfg, m, m, opt, None, False, ctx)
    return m, opt, ctx


def sd_diff(sd, sr):
    if sd["param_groups"] != sr["param_groups"] or sorted(sd["state"]) != sorted(sr["state"]):
        return 1.0
    d = 0.0
    for k in sr["state"]:
        if sorted(sr["state"][k]) != sorted(sd["state"][k]):
            return 1.0
        for kk, v in sr["state"][k].items():
            a = np.asarray(sd["state"][k][kk], float)
            d = max(d, float(np.max(np.abs(np.asarray(v, float) - a))))
    return d


def generic(cfg):
    m, opt, ctx = run_dist(cfg)
    f = flat(m)
    allf = dist.all_gather(flatp(m))
    rep = bool(all(np.array_equal(allf[0], a) for a in allf))
    res = {"rep": rep}
    if cfg.get("refd"):
        md, _, _ = run_dist(cfg, zero=False)
        res["dd"] = float(np.max(np.abs(flat(md) - f)))
    if cfg.get("sdcmp"):
        opt.consolidate_state_dict(to=0)
    if R == 0 and not cfg.get("no_ref1"):
        mr, opr, ctxr = run_ref(cfg)
        if cfg.get("sdcmp"):
            res["dsd"] = sd_diff(opt.state_dict(), opr.state_dict())
        res["d1"] = float(np.max(np.abs(flat(mr) - f)))
        if "grads" in ctx:
            res["dg"] = float(max(np.max(np.abs(a - b)) for a, b in zip(ctx["grads"], ctxr["grads"])))
    out(**res)


CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


def refusal(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        out(refused=f"{type(e).__name__}: {e}")
        return
    out(refused=None)


if __name__ == "__main__":
    name = sys.argv[1]
    if name.startswith("{"):
        generic(json.loads(name))
    else:
        exec(open(os.path.join(os.path.dirname(__file__), "zcases.py")).read())
        CASES[name]()
"""

CASES = r"""# custom cases; run inside zh.py's namespace (exec)
SGDM = ["SGD", {"lr": 0.1, "momentum": 0.9}]
ADAM = ["Adam", {"lr": 0.01}]


def _zro(m, cls=tt.optim.SGD, **kw):
    kw = kw or {"lr": 0.1, "momentum": 0.9}
    return ZRO(m.parameters(), optimizer_class=cls, **kw)


@case
def ref_overlap():
    m = make({})
    DDP(m)
    refusal(lambda: ZRO(m.parameters(), optimizer_class=tt.optim.SGD, overlap_with_ddp=True, lr=0.1))


@case
def ref_process_group():
    m = make({})
    DDP(m)
    refusal(lambda: ZRO(m.parameters(), optimizer_class=tt.optim.SGD, process_group=object(), lr=0.1))


@case
def ref_custom_optimizer():
    class SignSGD(tt.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, {"lr": lr})

        def step(self, closure=None):
            n = np.sqrt(sum(float((p.grad ** 2).sum()) for p in self.params if p.grad is not None))
            for p in self.params:
                if p.grad is not None:
                    p.data -= self.param_groups[0]["lr"] * p.grad / n

    m = make({})
    DDP(m)
    refusal(lambda: ZRO(m.parameters(), optimizer_class=SignSGD, lr=0.1))


@case
def ref_sgd_subclass():
    class MySGD(tt.optim.SGD):
        pass

    m = make({})
    DDP(m)
    refusal(lambda: ZRO(m.parameters(), optimizer_class=MySGD, lr=0.1))


@case
def ref_no_class():
    m = make({})
    DDP(m)
    refusal(lambda: ZRO(m.parameters(), lr=0.1))


@case
def ref_diff_lr():
    m = make({})
    DDP(m)
    refusal(lambda: ZRO(m.parameters(), optimizer_class=tt.optim.SGD, lr=0.1 * (R + 1)))


@case
def ref_diff_class():
    m = make({})
    DDP(m)
    refusal(lambda: ZRO(m.parameters(), optimizer_class=[tt.optim.SGD, tt.optim.Adam][R % 2], lr=0.1))


@case
def ref_diff_params():
    m = make({})
    DDP(m)
    ps = list(m.parameters())
    refusal(lambda: ZRO(ps if R == 0 else ps[:2], optimizer_class=tt.optim.SGD, lr=0.1))


@case
def ref_state_dict_unconsolidated():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
    opt.step()
    refusal(opt.state_dict)


@case
def ref_state_dict_other_rank():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
    opt.step()
    opt.consolidate_state_dict(to=0)
    msg = None
    try:
        opt.state_dict()
    except Exception as e:  # noqa: BLE001
        msg = f"{type(e).__name__}: {e}"
    msg = dist.broadcast(msg if R == 1 else None, root=1)
    out(refused=msg)


@case
def ref_join():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)

    def f():
        with ddp.join():
            ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
            opt.step()
    refusal(f)


@case
def ref_find_unused():
    m = make({})
    refusal(lambda: DDP(m, find_unused_parameters=True))


@case
def ref_grad_inplace():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()

    def f():
        m.l1.weight.grad *= 2
    refusal(f)
    opt.step()


def _abort(body):
    body()
    out(finished=True)


@case
def f_raise_before_step():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    for k in range(4):
        opt.zero_grad()
        ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
        if k == 2 and R == 1:
            raise RuntimeError("user error on rank 1")
        opt.step()
    out(finished=True)


@case
def f_exit_before_step():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    for k in range(4):
        opt.zero_grad()
        ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
        if k == 2 and R == 1:
            sys.exit(0)
        opt.step()
    out(finished=True)


@case
def f_exit_after_step():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    for k in range(4):
        opt.zero_grad()
        ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
        opt.step()
        if k == 1 and R == 1:
            sys.exit(0)
    out(finished=True)


@case
def f_skip_step():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    for k in range(4):
        opt.zero_grad()
        ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
        if not (k == 1 and R == 1):
            opt.step()
    out(finished=True)


@case
def f_raise_in_closure():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    for k in range(3):
        def closure():
            opt.zero_grad()
            loss = ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean()
            loss.backward()
            if k == 1 and R == 1:
                raise ValueError("closure fails on rank 1")
            return loss
        opt.step(closure)
    out(finished=True)


@case
def f_uneven_batches():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    for k in range(5 if R == 0 else 3):
        opt.zero_grad()
        ((ddp(X[k * B + R:(k + 1) * B:W]) - Y[k * B + R:(k + 1) * B:W]) ** 2).mean().backward()
        opt.step()
    out(finished=True)


@case
def f_zero_on_rank0_only():
    m = make({})
    ddp = DDP(m)
    if R == 0:
        opt = _zro(m)
    else:
        opt = tt.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for k in range(3):
        opt.zero_grad()
        ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
        opt.step()
    out(finished=True)


def _cmp(m, mr, **extra):
    f = flat(m)
    allf = dist.all_gather(flatp(m))
    rep = bool(all(np.array_equal(allf[0], a) for a in allf))
    res = {"rep": rep, **extra}
    if mr is not None:
        res["d1"] = float(np.max(np.abs(flat(mr) - f)))
    out(**res)


def _ref(cfg, steps):
    mr = make(cfg)
    opr = optim(cfg, pspec(cfg, mr), False)
    loop(cfg, mr, mr, opr, None, False, {}, steps=steps)
    return mr, opr


@case
def ckpt_resume_one_process():
    cfg = {"opt": ADAM}
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=3)
    opt.consolidate_state_dict(to=0)
    path = os.path.join(os.environ.get("TT_CKPT_DIR", "/tmp"), "ckpt_zero.npz")
    if R == 0:
        tt.save({"model": m.state_dict(), "opt": opt.state_dict()}, path)
    dist.barrier()
    if R == 0:
        ck = tt.load(path)
        m2 = make(cfg)
        m2.load_state_dict(ck["model"])
        o2 = optim(cfg, pspec(cfg, m2), False)
        o2.load_state_dict(ck["opt"])
        loop(cfg, m2, m2, o2, None, False, {}, steps=3, start=3)
        mr, _ = _ref(cfg, 6)
        out(rep=True, d1=float(np.max(np.abs(flat(mr) - flat(m2)))))


@case
def ckpt_to_rank1():
    cfg = {"opt": SGDM}
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=3)
    opt.consolidate_state_dict(to=1)
    if R == 1:
        sd = opt.state_dict()
        _, opr = _ref(cfg, 3)
        d = sd_diff(sd, opr.state_dict())
    else:
        d = None
    d = dist.broadcast(d if R == 1 else None, root=1)
    out(rep=True, dsd=d)


@case
def ckpt_roundtrip_load():
    cfg = {"opt": ["RMSprop", {"lr": 0.01, "momentum": 0.5}]}
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=3)
    opt.consolidate_state_dict(to=0)
    sd = dist.broadcast(opt.state_dict() if R == 0 else None)
    opt.load_state_dict(sd)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=3, start=3)
    mr = _ref(cfg, 6)[0] if R == 0 else None
    _cmp(m, mr)


@case
def ckpt_load_plain_sd():
    cfg = {"opt": ["AdamW", {"lr": 0.01}]}
    mr, opr = (_ref(cfg, 3) if R == 0 else (None, None))
    msd = dist.broadcast(mr.state_dict() if R == 0 else None)
    osd = dist.broadcast(opr.state_dict() if R == 0 else None)
    m = make(cfg)
    m.load_state_dict(msd)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    opt.load_state_dict(osd)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=3, start=3)
    if R == 0:
        loop(cfg, mr, mr, opr, None, False, {}, steps=3, start=3)
    _cmp(m, mr)


@case
def ckpt_sched_resume():
    cfg = {"opt": SGDM, "sched": "step"}
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    sched = loop(cfg, ddp, m, opt, ddp, True, {}, steps=3)
    opt.consolidate_state_dict(to=0)
    sd = dist.broadcast(opt.state_dict() if R == 0 else None)
    ssd = sched.state_dict()
    m2 = make(cfg)
    m2.load_state_dict(m.state_dict())
    d2 = DDP(m2)
    o2 = optim(cfg, pspec(cfg, m2), True)
    o2.load_state_dict(sd)
    s2 = SCHED["step"](o2)
    s2.load_state_dict(ssd)
    for k in range(3, 6):
        o2.zero_grad()
        xb, yb = batch(k, True, cfg)
        ((d2(xb) - yb) ** 2).mean().backward()
        o2.step()
        s2.step()
    mr = _ref(cfg, 6)[0] if R == 0 else None
    _cmp(m2, mr)


@case
def keep_grad_rank0():
    cfg = {"opt": SGDM}
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    kept = None
    for k in range(4):
        opt.zero_grad()
        xb, yb = batch(k, True, cfg)
        ((ddp(xb) - yb) ** 2).mean().backward()
        if k == 1 and R == 0:
            kept = m.l1.weight.grad
            copy = np.array(kept)
        opt.step()
    ok = bool(R != 0 or np.array_equal(kept, copy))
    mr = _ref(cfg, 4)[0] if R == 0 else None
    _cmp(m, mr, kept_ok=ok, d1x=0.0 if ok else 1.0)


@case
def closure_step():
    cfg = {"opt": SGDM}
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    losses = []
    for k in range(4):
        xb, yb = batch(k, True, cfg)

        def closure():
            opt.zero_grad()
            loss = ((ddp(xb) - yb) ** 2).mean()
            loss.backward()
            return loss
        losses.append(float(opt.step(closure).item()))
    mr = _ref(cfg, 4)[0] if R == 0 else None
    _cmp(m, mr)


@case
def step_without_backward():
    cfg = {"opt": SGDM}
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    for k in range(4):
        opt.zero_grad()
        if k != 2:
            xb, yb = batch(k, True, cfg)
            ((ddp(xb) - yb) ** 2).mean().backward()
        opt.step()
    if R == 0:
        mr = make(cfg)
        o = optim(cfg, pspec(cfg, mr), False)
        for k in range(4):
            o.zero_grad()
            if k != 2:
                xb, yb = batch(k, False, cfg)
                ((mr(xb) - yb) ** 2).mean().backward()
            o.step()
    else:
        mr = None
    _cmp(m, mr)


@case
def add_param_group():
    cfg = {"opt": SGDM}

    def run(mm, net, opt, shard):
        for k in range(4):
            if k == 2:
                opt.add_param_group({"params": list(mm.l1.parameters()), "lr": 0.05})
            opt.zero_grad()
            xb, yb = batch(k, shard, cfg)
            ((net(xb) - yb) ** 2).mean().backward()
            opt.step()
    m = make(cfg)
    ddp = DDP(m)
    opt = ZRO(list(m.l2.parameters()), optimizer_class=tt.optim.SGD, lr=0.1, momentum=0.9)
    run(m, ddp, opt, True)
    if R == 0:
        mr = make(cfg)
        run(mr, mr, tt.optim.SGD(list(mr.l2.parameters()), lr=0.1, momentum=0.9), False)
    else:
        mr = None
    _cmp(m, mr)


@case
def to_dtype_after_construct():
    cfg = {"opt": SGDM}

    def run(mm, net, opt, shard):
        for k in range(4):
            if k == 2:
                mm.to(np.float32)
            opt.zero_grad()
            xb, yb = batch(k, shard, cfg)
            ((net(xb.astype(np.float32)) - yb.astype(np.float32)) ** 2).mean().backward()
            opt.step()
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    run(m, ddp, opt, True)
    if R == 0:
        mr = make(cfg)
        run(mr, mr, optim(cfg, pspec(cfg, mr), False), False)
    else:
        mr = None
    f = flat(m)
    allf = dist.all_gather(f)
    rep = bool(all(np.array_equal(allf[0], a) for a in allf))
    res = {"rep": rep, "dtype": str(m.l1.weight.data.dtype)}
    if R == 0:
        res["d1"] = float(np.max(np.abs(flat(mr) - f)))
        res["tol"] = 1e-6
    out(**res)


@case
def to_dtype_before_wrap():
    cfg = {"opt": ADAM}
    m = make({"dtype": np.float32})
    m.to(np.float64)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=4)
    if R == 0:
        mr = make({"dtype": np.float32})
        mr.to(np.float64)
        o = optim(cfg, pspec(cfg, mr), False)
        loop(cfg, mr, mr, o, None, False, {}, steps=4)
    else:
        mr = None
    _cmp(m, mr)


@case
def compile_step():
    cfg = {"opt": SGDM}

    def mk(mm, net, opt):
        def step(xb, yb):
            opt.zero_grad()
            loss = ((net(xb) - yb) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return tt.compile(step)
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    st = mk(m, ddp, opt)
    try:
        for k in range(4):
            st(*batch(k, True, cfg))
    except Exception as e:  # noqa: BLE001
        out(refused=f"{type(e).__name__}: {e}")
        return
    if R == 0:
        mr = make(cfg)
        o = optim(cfg, pspec(cfg, mr), False)
        sr = mk(mr, mr, o)
        for k in range(4):
            sr(*batch(k, False, cfg))
    else:
        mr = None
    _cmp(m, mr)


@case
def two_models_gan():
    cfg = {"opt": ADAM}
    ma, mb = make(cfg), make(cfg)
    da, db = DDP(ma), DDP(mb)
    oa = optim(cfg, pspec(cfg, ma), True)
    ob = optim(cfg, pspec(cfg, mb), True)
    for k in range(3):
        oa.zero_grad()
        ob.zero_grad()
        xb, yb = batch(k, True, cfg)
        (((db(da(xb) @ np.ones((3, 5)) * 0.1) - yb) ** 2).mean()).backward()
        oa.step()
        ob.step()
    if R == 0:
        ra, rb = make(cfg), make(cfg)
        pa, pb = optim(cfg, pspec(cfg, ra), False), optim(cfg, pspec(cfg, rb), False)
        for k in range(3):
            pa.zero_grad()
            pb.zero_grad()
            xb, yb = batch(k, False, cfg)
            (((rb(ra(xb) @ np.ones((3, 5)) * 0.1) - yb) ** 2).mean()).backward()
            pa.step()
            pb.step()
        d = max(float(np.max(np.abs(flat(ra) - flat(ma)))), float(np.max(np.abs(flat(rb) - flat(mb)))))
    else:
        d = None
    out(rep=True, d1=d)


@case
def compile_loss_bare_module_sync():
    cfg = {"opt": SGDM}

    def run(mm, ddp, opt, shard):
        lossf = tt.compile(lambda xb, yb: ((mm(xb) - yb) ** 2).mean())
        for k in range(4):
            opt.zero_grad()
            lossf(*batch(k, shard, cfg)).backward()
            if ddp is not None:
                ddp.sync_gradients()
            opt.step()
    m = make(cfg)
    ddp = DDP(m)
    run(m, ddp, optim(cfg, pspec(cfg, m), True), True)
    mr = make(cfg) if R == 0 else None
    if R == 0:
        run(mr, None, optim(cfg, pspec(cfg, mr), False), False)
    _cmp(m, mr)


@case
def diff_lr_consequence():
    cfg = {"opt": ["SGD", {"lr": 0.1}]}
    m = make(cfg)
    ddp = DDP(m)
    opt = ZRO(m.parameters(), optimizer_class=tt.optim.SGD, lr=0.1 if R == 0 else 0.2)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=3)
    mr = _ref(cfg, 3)[0] if R == 0 else None
    _cmp(m, mr)


@case
def zero_before_wrap():
    cfg = {"opt": SGDM}
    m = make(cfg)
    opt = optim(cfg, pspec(cfg, m), True)
    ddp = DDP(m)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=4)
    mr = _ref(cfg, 4)[0] if R == 0 else None
    _cmp(m, mr)


@case
def resume_loads_after_zero():
    cfg = {"opt": ADAM}
    mr, opr = (_ref(cfg, 3) if R == 0 else (None, None))
    msd = dist.broadcast(mr.state_dict() if R == 0 else None)
    osd = dist.broadcast(opr.state_dict() if R == 0 else None)
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    m.load_state_dict(msd)
    opt.load_state_dict(osd)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=3, start=3)
    if R == 0:
        loop(cfg, mr, mr, opr, None, False, {}, steps=3, start=3)
    _cmp(m, mr)


@case
def noop_cast_after_zero():
    cfg = {"opt": SGDM}
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    m.to(np.float64)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=4)
    mr = _ref(cfg, 4)[0] if R == 0 else None
    _cmp(m, mr)


@case
def f_consolidate_rank1_only():
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
    opt.step()
    if R == 1:
        opt.consolidate_state_dict(to=0)
    opt.zero_grad()
    ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
    opt.step()
    out(finished=True)


@case
def extra_param_outside_ddp():
    cfg = {"opt": ADAM}

    def run(mm, net, opt, t, shard):
        for k in range(4):
            opt.zero_grad()
            xb, yb = batch(k, shard, cfg)
            ((net(xb) * t - yb) ** 2).mean().backward()
            if shard:
                t.grad = dist.all_reduce(np.asarray(t.grad), op="mean")
            opt.step()
    m = make(cfg)
    ddp = DDP(m)
    t = tt.tensor(np.array([1.5]), requires_grad=True)
    run(m, ddp, ZRO(list(m.parameters()) + [t], optimizer_class=tt.optim.Adam, lr=0.01), t, True)
    if R == 0:
        mr = make(cfg)
        tr = tt.tensor(np.array([1.5]), requires_grad=True)
        run(mr, mr, tt.optim.Adam(list(mr.parameters()) + [tr], lr=0.01), tr, False)
        dt = float(abs(tr.data[0] - t.data[0]))
    else:
        mr, dt = None, 0.0
    _cmp(m, mr, d1x=dt)


@case
def two_optimizers_split():
    cfg = {"opt": SGDM}

    def run(mm, net, o1, o2, shard):
        for k in range(4):
            o1.zero_grad()
            o2.zero_grad()
            xb, yb = batch(k, shard, cfg)
            ((net(xb) - yb) ** 2).mean().backward()
            o1.step()
            o2.step()
    m = make(cfg)
    ddp = DDP(m)
    z = ZRO(list(m.l2.parameters()), optimizer_class=tt.optim.Adam, lr=0.01)
    run(m, ddp, z, tt.optim.SGD(m.l1.parameters(), lr=0.1, momentum=0.9), True)
    if R == 0:
        mr = make(cfg)
        run(mr, mr, tt.optim.Adam(list(mr.l2.parameters()), lr=0.01),
            tt.optim.SGD(mr.l1.parameters(), lr=0.1, momentum=0.9), False)
    else:
        mr = None
    _cmp(m, mr)


def _fault_loop(bad):
    m = make({})
    ddp = DDP(m)
    opt = _zro(m)
    for k in range(4):
        opt.zero_grad()
        if not (k == 2 and R == 1 and bad == "nobackward"):
            ((ddp(X[R:B:W]) - Y[R:B:W]) ** 2).mean().backward()
        if k == 2 and R == 1 and bad == "kill":
            os.kill(os.getpid(), 9)
        if k == 2 and R == 1 and bad == "stuck":
            import time
            time.sleep(20)
        opt.step()
    out(finished=True)


@case
def f_kill_before_step():
    _fault_loop("kill")


@case
def f_stuck_before_step():
    _fault_loop("stuck")


@case
def f_rank1_skips_backward():
    _fault_loop("nobackward")


@case
def tied_weights():
    cfg = {"opt": ADAM}

    def mk():
        mm = make(cfg)
        mm.t1 = tt.nn.Linear(3, 3, rng=5, dtype=np.float64)
        mm.t2 = tt.nn.Linear(3, 3, rng=6, dtype=np.float64)
        mm.t2.weight = mm.t1.weight
        return mm

    def run(mm, net, opt, shard):
        for k in range(4):
            opt.zero_grad()
            xb, yb = batch(k, shard, cfg)
            ((mm.t2(mm.t1(net(xb))) - yb) ** 2).mean().backward()
            opt.step()
    m = mk()
    ddp = DDP(m)

    def fwd(x):
        return ddp(x)
    run(m, fwd, optim(cfg, list(m.parameters()), True), True)
    if R == 0:
        mr = mk()
        run(mr, mr, optim(cfg, list(mr.parameters()), False), False)
    else:
        mr = None
    _cmp(m, mr)


@case
def ref_duplicate_params():
    m = make({})
    DDP(m)
    ps = list(m.parameters())
    refusal(lambda: ZRO([{"params": ps}, {"params": ps[:1]}], optimizer_class=tt.optim.SGD, lr=0.1))


@case
def branch_used_on_rank0_only():
    cfg = {"opt": SGDM, "unused": True}

    def lossr(mm, net, xb, yb, use):
        o = net(xb)
        if use:
            o = o + mm.extra(o)
        return ((o - yb) ** 2).mean()
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    for k in range(4):
        opt.zero_grad()
        xb, yb = batch(k, True, cfg)
        o = ddp(xb)
        lossr(m, lambda x: o, xb, yb, R == 0).backward()
        opt.step()
    if R == 0:
        mr = make(cfg)
        o2 = optim(cfg, pspec(cfg, mr), False)
        for k in range(4):
            o2.zero_grad()
            xa, ya = X[k * B:(k + 1) * B], Y[k * B:(k + 1) * B]
            l0 = lossr(mr, mr, xa[0::2], ya[0::2], True)
            l1 = lossr(mr, mr, xa[1::2], ya[1::2], False)
            ((l0 + l1) * 0.5).backward()
            o2.step()
    else:
        mr = None
    _cmp(m, mr)


@case
def keep_grad_all_ranks():
    cfg = {"opt": SGDM}
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    kept = []
    for k in range(4):
        opt.zero_grad()
        xb, yb = batch(k, True, cfg)
        ((ddp(xb) - yb) ** 2).mean().backward()
        kept.append((m.l1.weight.grad, np.array(m.l1.weight.grad)))
        opt.step()
    ok = all(np.array_equal(a, b) for a, b in kept)
    ok = bool(min(dist.all_gather(np.array([float(ok)]))) == 1.0)
    mr = _ref(cfg, 4)[0] if R == 0 else None
    _cmp(m, mr, d1x=0.0 if ok else 1.0)


@case
def two_forwards_one_backward():
    cfg = {"opt": ADAM}

    def run(net, opt, shard):
        for k in range(4):
            opt.zero_grad()
            xa, ya = batch(k, shard, cfg)
            xb, yb = batch(k + 20, shard, cfg)
            (((net(xa) - ya) ** 2).mean() + ((net(xb) - yb) ** 2).mean()).backward()
            opt.step()
    m = make(cfg)
    ddp = DDP(m)
    run(ddp, optim(cfg, pspec(cfg, m), True), True)
    if R == 0:
        mr = make(cfg)
        run(mr, optim(cfg, pspec(cfg, mr), False), False)
    else:
        mr = None
    _cmp(m, mr)


@case
def stale_consolidate():
    cfg = {"opt": SGDM}
    m = make(cfg)
    ddp = DDP(m)
    opt = optim(cfg, pspec(cfg, m), True)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=2)
    opt.consolidate_state_dict(to=0)
    loop(cfg, ddp, m, opt, ddp, True, {}, steps=1, start=2)
    try:
        sd = opt.state_dict() if R == 0 else None
    except Exception as e:  # noqa: BLE001
        out(refused=f"{type(e).__name__}: {e}")
        return
    if R == 0:
        _, opr = _ref(cfg, 3)
        out(rep=True, dsd=sd_diff(sd, opr.state_dict()))
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    d = tmp_path_factory.mktemp("r14zero")
    (d / "zh.py").write_text(HARNESS)
    (d / "zcases.py").write_text(CASES)
    return d / "zh.py"


def launch(script, arg, n=2, timeout=40, zt=20):
    """Run the case; return (outcome, result dict or None, output)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), ZT=str(zt), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", TT_CKPT_DIR=str(script.parent))
    cmd = [find_mpiexec(), "-n", str(n), sys.executable, str(script), arg]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         cwd=str(script.parent), start_new_session=True)
    try:
        text, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        text, _ = p.communicate()
        return "hang", None, text
    res = None
    for line in text.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
    if p.returncode != 0:
        return "aborted", res, text
    if res is None:
        return "crash", None, text
    if "refused" in res:
        return ("refused" if res["refused"] else "accepted"), res, text
    if "finished" in res:
        return "finished", res, text
    tol = res.get("tol", 1e-15)
    ok = res["rep"] and res.get("dd", 0.0) == 0.0 and (res.get("d1") or 0.0) <= tol
    ok = ok and res.get("dg", 0.0) <= tol and res.get("dsd", 0.0) <= tol and res.get("d1x", 0.0) == 0.0
    return ("equal" if ok else "silent difference"), res, text


def xf(reason):
    return pytest.mark.xfail(strict=True, reason=reason)


SGDM = ["SGD", {"lr": 0.1, "momentum": 0.9}]
ADAM = ["Adam", {"lr": 0.01}]

# name -> (config for HARNESS's generic run, ranks)
GENERIC = {
    "sgd_momentum_wd": ({"opt": ["SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}],
                         "refd": True}, 2),
    "adam_amsgrad_wd": ({"opt": ["Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.01}]}, 2),
    "rmsprop_centered_momentum": ({"opt": ["RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5}]}, 2),
    "groups_wd_adamw": ({"opt": ["AdamW", {"lr": 0.01}], "groups": "wd"}, 2),
    "state_dict_frozen_scalar_param_adam": ({"opt": ADAM, "frozen": True, "scalar": True, "sdcmp": True}, 2),
    "state_dict_unused_groups_reversed_sgd": (
        {"opt": SGDM, "unused": True, "groups": "rev", "sdcmp": True}, 2),
    "sched_onecycle_adam_betas": ({"opt": ADAM, "sched": "onecycle"}, 2),
    "clip_grad_norm": ({"opt": SGDM, "clip": 0.05}, 2),
    "no_sync_accumulation": ({"opt": SGDM, "accum": 3, "no_sync": True}, 2),
    "accumulation_without_no_sync": ({"opt": SGDM, "accum": 2}, 2),
    "unused_every_other_step_adam": ({"opt": ADAM, "alt": True}, 2),
    "batchnorm_buffers_vs_plain_ddp": ({"opt": SGDM, "bn": True, "refd": True, "no_ref1": True}, 2),
    "batchnorm_no_broadcast_buffers_eval_on_rank0": (
        {"opt": SGDM, "bn": True, "refd": True, "no_ref1": True, "pre": "eval_rank0",
         "ddp": {"broadcast_buffers": False}}, 2),
    "gradient_as_bucket_view": ({"opt": SGDM, "ddp": {"gradient_as_bucket_view": True}}, 2),
    "allreduce_mpi": ({"opt": ["Adam", {"lr": 0.01, "weight_decay": 0.01}], "ddp": {"allreduce": "mpi"}}, 2),
    "tiny_buckets_parameters_as_bucket_view": (
        {"opt": ADAM, "ddp": {"bucket_cap_mb": 0.0001}, "zkw": {"parameters_as_bucket_view": True}}, 2),
    "bare_module_manual_average": ({"opt": SGDM, "wrap": False}, 2),
    "lr_momentum_wd_changed_from_outside": ({"opt": SGDM, "pre": "hyper_outside"}, 2),
    "zero_grad_set_to_none_false": ({"opt": SGDM, "zero_none": False}, 2),
    "grads_read_after_backward": ({"opt": ADAM, "pre": "read_grads"}, 2),
    "data_scaled_in_place_every_rank": ({"opt": SGDM, "post": "data_inplace"}, 2),
    "unfreeze_mid_training": ({"opt": SGDM, "frozen": True, "pre0": "unfreeze"}, 2),
    "float32_vs_plain_ddp": ({"opt": ADAM, "dtype": "float32", "refd": True, "no_ref1": True}, 2),
    "mixed_dtypes_vs_plain_ddp": ({"opt": SGDM, "dtype2": "float32", "refd": True, "no_ref1": True}, 2),
    "three_ranks_sgd_momentum_wd": ({"opt": ["SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}],
                                     "refd": True}, 3),
    "three_ranks_rmsprop_groups_state_dict": (
        {"opt": ["RMSprop", {"lr": 0.01, "centered": True}], "groups": "two", "sdcmp": True}, 3),
    "one_process": ({"opt": SGDM, "sched": "step", "refd": True}, 1),
}
GENERIC_XFAIL = {
    "data_scaled_in_place_every_rank": (
        "`with tt.no_grad(): p.data *= 0.9` on every rank after each step (PyTorch's per-replica idiom) "
        "scales the one shared copy once per rank: 0.10 from one process after 5 SGD steps"),
    "unfreeze_mid_training": (
        "`l1.bias.requires_grad = True` after the wrap: its gradient is never averaged (0.0049 from one "
        "process, 0.011 from plain DDP after 5 steps), silently; PyTorch's DDP does not average it either"),
}

# name -> expected words in the refusal (every rank catches it)
REFUSALS = {
    "ref_overlap": "overlap_with_ddp",
    "ref_process_group": "process_group",
    "ref_custom_optimizer": "optimizer_class",
    "ref_diff_lr": "rank",
    "ref_diff_class": "rank",
    "ref_diff_params": "rank",
    "ref_state_dict_unconsolidated": "consolidate_state_dict",
    "ref_state_dict_other_rank": "consolidate_state_dict",
    "ref_join": "ZeroRedundancyOptimizer",
    "ref_find_unused": "find_unused_parameters",
    "ref_grad_inplace": "read-only",
    "compile_step": "tt.compile",
    "ref_duplicate_params": "already in another parameter group",
}
REFUSAL_XFAIL = {}

# name -> (case or config, words the aborting job must print): faults, and refusals that end the job
FAULTS = {
    "f_raise_before_step": ("f_raise_before_step", "rank 1"),
    "f_exit_before_step": ("f_exit_before_step", "rank(s) 1"),
    "f_skip_step": ("f_skip_step", "step"),
    "f_raise_in_closure": ("f_raise_in_closure", "rank 1"),
    "f_uneven_batches": ("f_uneven_batches", "rank(s) 1"),
    "f_zero_on_rank0_only": ("f_zero_on_rank0_only", "ZeroRedundancyOptimizer"),
    "data_rebound_every_rank": (json.dumps({"opt": SGDM, "post": "data_rebind"}),
                                "no longer lives in the shared"),
    "to_dtype_after_construct": ("to_dtype_after_construct", "no longer lives in the shared"),
    "add_param_group_later": ("add_param_group", "add_param_group"),
    "f_consolidate_on_rank1_only": ("f_consolidate_rank1_only", "different collectives"),
    "f_kill_before_step": ("f_kill_before_step", "BAD TERMINATION"),
    "f_stuck_before_step": ("f_stuck_before_step", "watchdog"),
    "f_rank1_skips_backward": ("f_rank1_skips_backward", "watchdog"),
}
FAULT_XFAIL = {}

CUSTOM = ["ckpt_resume_one_process", "ckpt_to_rank1", "ckpt_load_plain_sd",
          "ckpt_sched_resume", "resume_loads_after_zero", "stale_consolidate", "keep_grad_rank0",
          "closure_step", "noop_cast_after_zero", "compile_loss_bare_module_sync",
          "zero_before_wrap", "extra_param_outside_ddp", "two_optimizers_split",
          "tied_weights", "branch_used_on_rank0_only", "two_forwards_one_backward"]
CUSTOM_XFAIL = {
    "stale_consolidate": (
        "consolidate_state_dict(to=0) after step 2, one more step, then state_dict() on rank 0 silently "
        "gives the momentum of step 2 (0.24 off the plain optimizer's after 3), as PyTorch's 'last "
        "global state known'"),
}


# Each case starts mpiexec (about 2 s): the default run takes these, one of each kind; the whole
# file (about 130 s) runs with TT_DISTRIBUTED_FULL=1.
FULL = os.environ.get("TT_DISTRIBUTED_FULL") == "1"
QUICK = {"adam_amsgrad_wd", "no_sync_accumulation", "data_scaled_in_place_every_rank", "ref_diff_lr",
         "f_exit_before_step", "ckpt_resume_one_process"}
_LONG = pytest.mark.skipif(not FULL, reason="one of the full ZeroRedundancyOptimizer sweep's cases "
                                            "(2 s each under mpiexec): set TT_DISTRIBUTED_FULL=1")


def _params(table, xfails):
    return [pytest.param(k, marks=([xf(xfails[k])] if k in xfails else []) + ([] if k in QUICK else [_LONG]))
            for k in table]


def _report(outcome, res, text):
    return f"outcome {outcome}, result {res}\n{text[-3000:]}"


@pytest.mark.parametrize("name", _params(GENERIC, GENERIC_XFAIL))
def test_generic_equals_one_process(script, name):
    cfg, n = GENERIC[name]
    outcome, res, text = launch(script, json.dumps(cfg), n=n)
    assert outcome == "equal", _report(outcome, res, text)


@pytest.mark.parametrize("name", _params(CUSTOM, CUSTOM_XFAIL))
def test_custom_equals_one_process(script, name):
    outcome, res, text = launch(script, name)
    assert outcome == "equal", _report(outcome, res, text)


@pytest.mark.parametrize("name", _params(REFUSALS, REFUSAL_XFAIL))
def test_refused_with_clear_message(script, name):
    outcome, res, text = launch(script, name)
    assert outcome == "refused", _report(outcome, res, text)
    assert REFUSALS[name] in res["refused"], res["refused"]


@pytest.mark.parametrize("name", _params(FAULTS, FAULT_XFAIL))
def test_fault_aborts_naming_it(script, name):
    arg, words = FAULTS[name]
    outcome, res, text = launch(script, arg, timeout=30, zt=3)
    assert outcome == "aborted", _report(outcome, res, text)
    assert words in text, text[-3000:]
