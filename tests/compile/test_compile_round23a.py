"""Round 23a: compile-vs-eager cases on the guide's newest promises, written by a fresh user.

Written from README.md, docs/guides/compile.md and the public docstrings only, as a
torch.compile / jax.jit / mx.compile / TinyJit user, attacking five areas, each case run eagerly
and compiled over 12 (some 42) calls with a change made outside before calls 3, 10 (and 40):
(1) Python state changed inside f: memo dicts (``setdefault``, ``in``, ``get``, ``KeyError``),
``if self.mask is None``, lazily built tables, ``lru_cache``, ``cached_property``, one-time
initialisation, counters, appends, Module attributes set in forward from numbers or constants,
state set only on some calls, state set by forward hooks, caches cleared outside;
(2) hyperparameters written into ``opt.param_groups`` inside a whole step from number arguments
(float, np.float64/32, int, ``lr * 0.5``, ``lr * warmup(step)``, ``lr ** 2``, ``np.exp``), before
or after ``zero_grad``, after backward or after the step, in every group, one group or the
second, with StepLR/ExponentialLR/CosineAnnealingLR/LambdaLR present, momentum, betas,
weight_decay and eps written too, the lr read back inside and returned; (3) arrays over 4,096
elements held by f (closure, global, Module attribute, list, namespace, a dataset object) that a
program line reads and that NumPy code in f computes on (statistics, normalisation, norms,
slices, element reads, ``X.T @ v``, ``np.trace``, ``bincount``), changed in place outside (all,
one element, a row, a column, through a view); (4) callables reached indirectly (dicts, lists,
nested configs, attributes, namespaces, ``attrgetter``/``methodcaller``, class swaps, methods
replaced on the class or the instance, ``__defaults__``, partials whose keywords are mutated,
``getattr(tt, cfg.act)``, static methods, properties) and configs nested in dataclasses,
namespaces and Modules read outside the module's forward; (5) value-dependent control flow
(branches on the loss, Newton ``while`` loops, early exits, skipping the step), gradients to
closed-over models, ``w.data = ...``, ``model.to(dtype)``, masks per batch, dropout, passed
Generators, BatchNorm, frozen layers, EMA, gradient accumulation, weight tying, modes.

Compared after every call, bit for bit: outputs (type, dtype, shape, requires_grad, bytes), all
earlier outputs again, arguments, parameters, ``.grad``, buffers, optimizer state and
hyperparameters, the Python state the case holds (caches, counters, flags, attributes), the
global generator, memory sharing and identity of the results, and writes into the results. A
refusal (RuntimeError from tt.compile) passes only where the guide names the program as refused
(``refuse_ok``) and only if it left no trace; a refusal elsewhere is a false refusal and fails.

The families found (each case a strict xfail naming the difference):

* **Stale element reads of large held arrays.** An array over 4,096 elements that a program line
  reads (``tt.tensor(X)[idx]``) and that f also indexes into Python or NumPy, changed in place
  outside: ``float(X[0, 0])``, ``float(X[-1, -1])``, ``X[3, 4]``, ``X[r, c]`` with int arguments,
  ``X[:10] * 2``, ``X.T @ X[:, 0]``, ``float(self.P[0, 0])`` in a Module's forward in a whole
  training step, held in a closure, a Module attribute, a list or a namespace: the compiled
  program keeps the recording's values. Statistics (``X.mean(0)``, ``X.std(0)``,
  ``np.abs(X).max()``, ``np.linalg.norm``, ``X.min()``, ``X.sum()``, ``np.trace``,
  ``X[:, -1].sum()``, ``X[5:40].var()``), ``X.item(0)``, ``X[0].tolist()``, ``X.ravel()[0]``,
  ``X[:6].copy()``, ``np.dot(X[:6], X[0])`` and ``tt.tensor(X[0])`` are right.
* **Hyperparameters written inside.** ``g["betas"] = (1 - lr, 0.999)``, ``(b1, 0.999)`` or
  ``(0.9, 1 - lr * 0.01)`` stores the tracer's ``_Number`` in ``param_groups`` (the wrong type)
  frozen at the first call's value, so Adam's moments differ; ``opt.param_groups[0]["lr"] = lr``
  *after* ``opt.step()`` is not refused as documented: the compiled first call steps with the new
  lr (eager: the old one), and written between ``opt.step()`` and ``sched.step()`` the group's lr
  is lost (0.05 compiled, 0.1 eager); the lr read from the group before it is written
  (``prev = g["lr"]; g["lr"] = lr``) and returned or multiplied into the loss is frozen at the
  recording's value. ``lr`` itself (float, np.float64/32, int, every expression), ``momentum =
  1 - lr``, ``weight_decay``, ``eps``, betas as a list, every optimizer, groups and schedulers
  are right.
* **Refusals that leave a trace.** An attribute set inside on an object or a Module
  (``c.n = c.n + 1``, ``self.calls += 1``, ``self.t = t`` from a float argument, ``self.last =
  t``), refused as documented, stays set after the RuntimeError (a counter is 2: both recordings
  ran); ``self.temp = t`` with the same float on every call is refused too (a constant written
  each call, ``cfg.mode = "fast"``, is not). Dicts, lists and namespaces are put back.
* **State set inside on some calls only.** A flag set when the loss is large (``if s > 40:
  st["seen_big"] = True``, ``if max|y| > 5: self.boost = 2.0`` in forward) is read stale by the
  program on a later call (compiled returns half of eager's result).
* **A false refusal.** ``BatchNorm1d.momentum = None`` (the cumulative average training.md
  documents) in a compiled training step is refused.

Nothing else differed: caches filled inside (memo dicts, lazily built masks per sequence length,
``if self.mask is None``, ``cached_property``, registries, recursive memos, caches cleared
outside), one-time initialisation, hooks that store shapes, every callable and config reached
indirectly, value-dependent control flow, closed-over models, ``w.data``, ``model.to``, dropout,
generators, BatchNorm, EMA, gradient accumulation, weight tying and modes all gave eager's bits
or a documented clean refusal (appends, counters in dicts, ``lru_cache``, values after the step).

The harness (``run``) is round 21a's: ``build()`` returns ``f``, ``args(i)``, optionally
``change(i)``, ``snap()`` and ``wrap_outer``; it runs twice from the same seeds, eagerly and
compiled.
"""

import dataclasses
import functools
import math
import types
import warnings

import numpy as np
import pytest

import tinytensor as tt

nn = tt.nn
F = tt.nn.functional

CHANGE_AT = (2, 9, 39)


class Refused(Exception):
    pass


def _cmp(a, b, path):
    if isinstance(a, tt.Tensor) or isinstance(b, tt.Tensor):
        assert type(a) is type(b), f"{path}: type {type(a)} vs {type(b)}"
        assert a.requires_grad == b.requires_grad, f"{path}: requires_grad"
        _cmp(a.data, b.data, path + ".data")
        return
    if isinstance(a, np.random.Generator) or isinstance(b, np.random.Generator):
        assert type(a) is type(b), f"{path}: type"
        _cmp(a.bit_generator.state, b.bit_generator.state, path + ".state")
        return
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert type(a) is type(b), f"{path}: type {type(a)} vs {type(b)}"
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} vs {b.dtype}"
        assert a.shape == b.shape, f"{path}: shape {a.shape} vs {b.shape}"
        assert a.tobytes() == b.tobytes(), f"{path}: values\n{a}\n{b}"
        return
    if isinstance(a, np.generic) or isinstance(b, np.generic):
        assert type(a) is type(b), f"{path}: type {type(a)} vs {type(b)}"
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), f"{path}: {a!r} vs {b!r}"
        return
    if isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b), f"{path}: keys {list(a)} vs {b}"
        for k in a:
            _cmp(a[k], b[k], f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: {type(a)} vs {type(b)}"
        for k, (u, v) in enumerate(zip(a, b)):
            _cmp(u, v, f"{path}[{k}]")
        return
    if isinstance(a, float):
        assert type(a) is type(b) and repr(a) == repr(b), f"{path}: {a!r} vs {b!r}"
        return
    assert type(a) is type(b) and a == b, f"{path}: {a!r} vs {b!r}"


def _leaves(obj, out):
    """The array-holding leaves of obj: (object, ndarray) pairs, in a fixed order."""
    if isinstance(obj, tt.Tensor):
        out.append((obj, obj.data))
    elif isinstance(obj, np.ndarray):
        out.append((obj, obj))
    elif isinstance(obj, dict):
        for v in obj.values():
            _leaves(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _leaves(v, out)
    return out


def _sharing(out, args, state):
    """Which result arrays share memory (or are the same object) with what."""
    res = _leaves(out, [])
    others = res + _leaves(args, []) + _leaves(state, [])
    table = []
    for j, (oj, aj) in enumerate(res):
        row = []
        for k, (ok, ak) in enumerate(others):
            if k == j:
                continue
            row.append((oj is ok, aj is ak, bool(np.shares_memory(aj, ak))))
        table.append(row)
    return table


def _write_into(out):
    """The caller post-processes results in place; which writes succeed."""
    done = []
    seen = set()
    for _, a in _leaves(out, []):
        if id(a) in seen or a.dtype.kind not in "fc":
            continue
        seen.add(id(a))
        try:
            a *= 0.5
            done.append(True)
        except ValueError:
            done.append(False)
    return done


def _freeze(obj):
    """A deep, comparable copy of obj (arrays as bytes), to compare state across a refusal."""
    if isinstance(obj, tt.Tensor):
        return ("T", obj.requires_grad, _freeze(obj.data))
    if isinstance(obj, np.random.Generator):
        return ("G", _freeze(obj.bit_generator.state))
    if isinstance(obj, np.ndarray):
        return ("A", obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, np.generic):
        return ("S", type(obj).__name__, np.asarray(obj).tobytes())
    if isinstance(obj, dict):
        return ("D", tuple((repr(k), _freeze(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return ("L", type(obj).__name__, tuple(_freeze(v) for v in obj))
    if isinstance(obj, float):
        return ("F", repr(obj))
    return ("O", type(obj).__name__, repr(obj) if isinstance(obj, (int, str, bool,
                                                                  type(None))) else id(obj))


def opt_state(opt):
    out = []
    for st in opt.state.values():
        out.append({k: v for k, v in st.items()})
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    return [out, groups]


def module_state(m):
    ps = [(n, p, p.grad) for n, p in m.named_parameters()]
    bs = [(n, b) for n, b in m.named_buffers()]
    return [ps, bs, m.training]


def run(build, calls=12, change_at=CHANGE_AT, write=True):
    """build() -> dict(f=, args=i->tuple, change=i->None, snap=()->obj, wrap_outer=)."""
    tt.manual_seed(0)
    ge = tt.get_rng_state()
    E = build()
    tt.manual_seed(0)
    gc = tt.get_rng_state()
    C = build()
    cf = tt.compile(C["f"])
    ef = E["f"]
    if "wrap_outer" in C:
        cf = C["wrap_outer"](cf)
        ef = E["wrap_outer"](ef)
    outs_e, outs_c = [], []
    n_err = 0
    write = C.get("write", write)
    for i in range(calls):
        if i in change_at:
            for S in (E, C):
                if "change" in S:
                    S["change"](i)
        tt.set_rng_state(ge)
        err_e = out_e = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                a_e = E["args"](i)
                out_e = ef(*a_e)
            except Exception as e:  # noqa: BLE001
                err_e = e
        ge = tt.get_rng_state()
        tt.set_rng_state(gc)
        err_c = out_c = None
        pre = _freeze([C["snap"]() if "snap" in C else None, tt.get_rng_state()])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                a_c = C["args"](i)
                pre_args = _freeze(a_c)
                out_c = cf(*a_c)
            except RuntimeError as e:
                if "tt.compile" in str(e) and err_e is None:
                    post = _freeze([C["snap"]() if "snap" in C else None, tt.get_rng_state()])
                    assert pre == post, f"call {i}: the refusal left a trace in the state"
                    assert pre_args == _freeze(a_c), f"call {i}: the refusal changed arguments"
                    raise Refused(str(e)) from e
                err_c = e
            except Exception as e:  # noqa: BLE001
                err_c = e
        gc = tt.get_rng_state()
        _cmp(a_e, a_c, f"call {i} arguments after the call")
        if err_e is not None or err_c is not None:
            assert type(err_e) is type(err_c), f"call {i}: eager {err_e!r} compiled {err_c!r}"
            n_err += 1
        else:
            _cmp(out_e, out_c, f"call {i} out")
            outs_e.append(out_e)
            outs_c.append(out_c)
        se = E["snap"]() if "snap" in E else None
        sc = C["snap"]() if "snap" in C else None
        if err_e is None and err_c is None:
            assert _sharing(out_e, a_e, se) == _sharing(out_c, a_c, sc), \
                f"call {i}: memory sharing of the results differs"
        for k, (a, b) in enumerate(zip(outs_e, outs_c)):
            _cmp(a, b, f"after call {i}: output of call {k}")
        _cmp(se, sc, f"call {i} state")
        _cmp(ge, gc, f"call {i} global rng")
        if write and err_e is None and err_c is None:
            assert _write_into(out_e) == _write_into(out_c), f"call {i}: writing into results"
            _cmp(E["snap"]() if "snap" in E else None, C["snap"]() if "snap" in C else None,
                 f"call {i} state after writing into the results")
            _cmp(a_e, a_c, f"call {i} arguments after writing into the results")
    assert n_err <= calls // 2, f"the case is vacuous: {n_err} of {calls} calls raised ({err_e!r})"
    return cf


def xs(i, shape, dtype=np.float32, seed=0):
    return np.random.default_rng(1000 * seed + i).standard_normal(shape).astype(dtype)


def ints(i, n, high, seed=0):
    return np.random.default_rng(5000 + 1000 * seed + i).integers(0, high, n)


CASES = {}


def case(name, calls=12, xfail=None, refuse_ok=False):
    """refuse_ok: the guide names this program as refused; otherwise a refusal is a finding."""
    def deco(build):
        assert name not in CASES, name
        CASES[name] = (build, calls, xfail, refuse_ok)
        return build
    return deco


def mlp(d_in=4, d_out=3, dtype=np.float32, act=None):
    return nn.Sequential(nn.Linear(d_in, 8, rng=0, dtype=dtype), act or nn.Tanh(),
                         nn.Linear(8, d_out, rng=1, dtype=dtype))


def model_snap(model, opt=None, extra=None):
    return lambda: [module_state(model), opt_state(opt) if opt is not None else None,
                    extra() if extra else None]


def at(i, d):
    """Value at change call i from a dict, or None."""
    return d.get(i)




# ============================================================ (1) Python state changed inside f


def _shape_args(i, d=4, dtype=np.float32):
    """T changes at the change calls: a new shape, so a cache keyed by it fills again."""
    T = 3 if i < 2 else (5 if i < 9 else (3 if i < 39 else 6))
    return (xs(i, (T, d), dtype),)


def _st_setdefault_mask():
    masks = {}

    def f(x):
        T = x.shape[0]
        m = masks.setdefault(T, np.tril(np.ones((T, T), np.float32)))
        return tt.matmul(tt.tensor(m), x) * 2
    return dict(f=f, args=_shape_args, snap=lambda: {k: v for k, v in sorted(masks.items())})


case("state_setdefault_tril_mask")(_st_setdefault_mask)


def _st_in_dict_mask(kind):
    def build():
        cache = {}

        def f(x):
            T = x.shape[0]
            if kind == "in":
                if T not in cache:
                    cache[T] = np.triu(np.full((T, T), -1e9, np.float32), 1)
                m = cache[T]
            elif kind == "get":
                m = cache.get(T)
                if m is None:
                    m = cache[T] = np.triu(np.full((T, T), -1e9, np.float32), 1)
            else:
                try:
                    m = cache[T]
                except KeyError:
                    m = cache[T] = np.triu(np.full((T, T), -1e9, np.float32), 1)
            s = tt.matmul(x, tt.transpose(x)) + m
            return tt.softmax(s)
        return dict(f=f, args=_shape_args, snap=lambda: dict(sorted(cache.items())))
    return build


for _k in ("in", "get", "keyerror"):
    case(f"state_lazy_mask_{_k}")(_st_in_dict_mask(_k))


class _LazyMask(nn.Module):
    def __init__(self, style):
        super().__init__()
        self.lin = nn.Linear(4, 4, rng=0)
        self.mask = None
        self.style = style

    def forward(self, x):
        T = x.shape[0]
        if self.style == "none":
            if self.mask is None:
                self.mask = np.tril(np.ones((T, T), np.float32))
        elif self.style == "shape":
            if self.mask is None or self.mask.shape[0] != T:
                self.mask = np.tril(np.ones((T, T), np.float32))
        elif self.style == "hasattr":
            if not hasattr(self, "table") or self.table.shape[0] != T:
                self.table = np.arange(T, dtype=np.float32)[:, None]
            return self.lin(x) + tt.tensor(self.table)
        m = self.mask[:T, :T]
        return tt.matmul(tt.tensor(m), self.lin(x))


def _st_module_lazy(style, fixed_shape):
    def build():
        m = _LazyMask(style)

        def args(i):
            return (xs(i, (4, 4)),) if fixed_shape else _shape_args(i)

        def extra():
            return [getattr(m, "mask", None), getattr(m, "table", None)]
        return dict(f=lambda x: m(x), args=args, snap=model_snap(m, extra=extra))
    return build


for _s in ("none", "shape", "hasattr"):
    for _fs in (True, False):
        if _s == "none" and not _fs:
            continue
        case(f"state_module_lazy_{_s}_{'fixed' if _fs else 'changing'}")(_st_module_lazy(_s, _fs))


def _st_once_init():
    state = {"ready": False, "scale": None}

    def f(x):
        if not state["ready"]:
            state["ready"] = True
            state["scale"] = 2.5
        return x * state["scale"]
    return dict(f=f, args=lambda i: (xs(i, (3,)),), snap=lambda: dict(state))


case("state_one_time_init_dict")(_st_once_init)


def _st_once_init_nonlocal():
    holder = [None]

    def f(x):
        if holder[0] is None:
            holder[0] = np.linspace(0, 1, 3).astype(np.float32)
        return tt.tensor(holder[0]) * x
    return dict(f=f, args=lambda i: (xs(i, (3,)),), snap=lambda: list(holder))


case("state_one_time_init_list_slot")(_st_once_init_nonlocal)


def _st_init_attr_from_const():
    class Cfg:
        pass
    cfg = Cfg()
    cfg.mode = None

    def f(x):
        cfg.mode = "fast"
        cfg.k = 3
        return x * cfg.k
    return dict(f=f, args=lambda i: (xs(i, (3,)),), snap=lambda: dict(vars(cfg)))


case("state_attr_set_to_same_constant_every_call")(_st_init_attr_from_const)


def _st_counter(kind):
    def build():
        st = {"n": 0}
        lst = []

        class C:
            n = 0
        c = C()

        def f(x):
            if kind == "dict":
                st["n"] += 1
            elif kind == "list":
                lst.append(1)
            elif kind == "attr":
                c.n = c.n + 1
            return x * 2
        return dict(f=f, args=lambda i: (xs(i, (3,)),),
                    snap=lambda: [dict(st), list(lst), c.n])
    return build


for _k in ("dict", "list", "attr"):
    case(f"state_counter_{_k}", refuse_ok=True)(_st_counter(_k))


def _st_counter_module():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2, rng=0)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.lin(x)
    m = M()
    return dict(f=lambda x: m(x), args=lambda i: (xs(i, (2, 3)),),
                snap=model_snap(m, extra=lambda: m.calls))


case("state_module_forward_counter", refuse_ok=True)(_st_counter_module)


def _st_attr_from_number(which):
    def build():
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 2, rng=0)
                self.t = 1.0

            def forward(self, x, t):
                if which == "store_then_use":
                    self.t = t
                    return self.lin(x) / self.t
                if which == "use_then_store":
                    out = self.lin(x) / self.t
                    self.t = t
                    return out
                if which == "store_expr":
                    self.t = t * 0.5 + 1
                    return self.lin(x) * self.t
                self.last = t
                return self.lin(x) * t
        m = M()

        def args(i):
            return (xs(i, (2, 3)), 0.5 + 0.25 * i)
        return dict(f=lambda x, t: m(x, t), args=args,
                    snap=model_snap(m, extra=lambda: [m.t, getattr(m, "last", None)]))
    return build


for _w in ("store_then_use", "use_then_store", "store_expr", "store_unread"):
    case(f"state_module_attr_from_float_{_w}", refuse_ok=True)(_st_attr_from_number(_w))


def _st_attr_from_number_const_arg():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2, rng=0)
            self.temp = 1.0

        def forward(self, x, t):
            self.temp = t
            return self.lin(x) / self.temp
    m = M()
    return dict(f=lambda x, t: m(x, t), args=lambda i: (xs(i, (2, 3)), 2.0),
                snap=model_snap(m, extra=lambda: m.temp))


case("state_module_attr_from_same_float_every_call", refuse_ok=True)(_st_attr_from_number_const_arg)


def _st_some_calls(kind):
    """State changed inside only on some calls (when a traced value crosses a threshold)."""
    def build():
        st = {"seen_big": False, "max": -1.0}

        def f(x):
            s = tt.sum(x * x)
            if kind == "flag":
                if s > 40:
                    st["seen_big"] = True
            elif kind == "max_float":
                v = float(s)
                if v > st["max"]:
                    st["max"] = v
            return s * (2.0 if st["seen_big"] else 1.0)

        def args(i):
            sc = 3.0 if i in (2, 9) else 1.0
            return (xs(i, (4, 3)) * np.float32(sc),)
        return dict(f=f, args=args, snap=lambda: dict(st))
    return build


case("state_flag_set_on_big_call", refuse_ok=True)(_st_some_calls("flag"))
case("state_running_max_float", refuse_ok=True)(_st_some_calls("max_float"))


def _st_number_arg_step(kind):
    """Changed only on the 3rd and 10th call, driven by an int step argument."""
    def build():
        st = {"phase": 0}

        def f(x, step):
            if kind == "eq":
                if step == 2 or step == 9:
                    st["phase"] += 1
            else:
                if step >= 9:
                    st["phase"] = 2
            return x * (st["phase"] + 1)
        return dict(f=f, args=lambda i: (xs(i, (3,)), i), snap=lambda: dict(st))
    return build


case("state_phase_bumped_on_step_3_and_10", refuse_ok=True)(_st_number_arg_step("eq"))
case("state_phase_set_once_from_step_10", refuse_ok=True)(_st_number_arg_step("ge"))


def _st_lru_helper():
    @functools.lru_cache(maxsize=16)
    def table(n):
        return np.arange(n, dtype=np.float32)

    def f(x):
        return x * tt.tensor(table(x.shape[0]))
    return dict(f=f, args=_shape_args_vec)


def _shape_args_vec(i):
    n = 3 if i < 2 else (5 if i < 9 else 3)
    return (xs(i, (n,)),)


case("state_lru_cache_table", refuse_ok=True)(_st_lru_helper)


def _st_cached_property():
    class Pos:
        def __init__(self, n):
            self.n = n

        @functools.cached_property
        def enc(self):
            return np.sin(np.arange(self.n, dtype=np.float32))
    p = Pos(3)

    def f(x):
        return x + tt.tensor(p.enc)
    return dict(f=f, args=lambda i: (xs(i, (3,)),), snap=lambda: dict(p.__dict__))


case("state_cached_property_filled_inside")(_st_cached_property)


def _st_hook_state(kind):
    def build():
        m = mlp()
        seen = {}
        log = []

        def hook(mod, inp, out):
            if kind == "shape":
                seen["shape"] = out.shape
            elif kind == "count":
                seen["n"] = seen.get("n", 0) + 1
            elif kind == "append":
                log.append(1)
            elif kind == "once":
                seen.setdefault("first", True)
        m[0].register_forward_hook(hook)
        return dict(f=lambda x: tt.sum(m(x)), args=lambda i: (xs(i, (2, 4)),),
                    snap=model_snap(m, extra=lambda: [dict(seen), list(log)]))
    return build


case("state_hook_stores_shape")(_st_hook_state("shape"))
case("state_hook_setdefault_once")(_st_hook_state("once"))
case("state_hook_counts_calls", refuse_ok=True)(_st_hook_state("count"))
case("state_hook_appends", refuse_ok=True)(_st_hook_state("append"))


def _st_cache_then_changed_outside():
    """A cache filled inside, cleared outside on the 3rd and 10th call."""
    cache = {}

    def f(x):
        if "w" not in cache:
            cache["w"] = np.float32(len(cache) + 1.5) * np.ones(3, np.float32)
        return x * tt.tensor(cache["w"])

    def change(i):
        cache.clear()
    return dict(f=f, args=lambda i: (xs(i, (3,)),), change=change, snap=lambda: dict(cache))


case("state_cache_cleared_outside")(_st_cache_then_changed_outside)


def _st_cache_value_from_data():
    """A cache filled from the first batch's values (a normaliser fitted once)."""
    st = {"mu": None}

    def f(x):
        if st["mu"] is None:
            st["mu"] = np.asarray(x).mean(0)
        return x - tt.tensor(st["mu"])
    return dict(f=f, args=lambda i: (xs(i, (4, 3)),), snap=lambda: dict(st))


case("state_normaliser_fitted_on_first_batch")(_st_cache_value_from_data)


def _st_cache_float_from_value():
    st = {"scale": None}

    def f(x):
        if st["scale"] is None:
            st["scale"] = float(tt.max(tt.abs(x)))
        return x / st["scale"]
    return dict(f=f, args=lambda i: (xs(i, (4, 3)),), snap=lambda: dict(st))


case("state_scale_fitted_from_float_of_first_batch")(_st_cache_float_from_value)


def _st_cache_keyed_dtype():
    cache = {}

    def f(x):
        key = (x.shape, str(x.dtype))
        if key not in cache:
            cache[key] = np.ones(x.shape, x.dtype) * 3
        return x * tt.tensor(cache[key])

    def args(i):
        return (xs(i, (2, 3), np.float64 if 2 <= i < 9 else np.float32),)
    return dict(f=f, args=args, snap=lambda: {str(k): v for k, v in cache.items()})


case("state_cache_keyed_by_shape_dtype")(_st_cache_keyed_dtype)


def _st_lazy_param_module():
    """A LazyLinear-style module: builds its weight on the first call."""
    class Lazy(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = None

        def forward(self, x):
            if self.w is None:
                self.w = tt.tensor(np.linspace(-1, 1, x.shape[1] * 2, dtype=np.float32)
                                   .reshape(x.shape[1], 2))
            return tt.matmul(x, self.w)
    m = Lazy()
    return dict(f=lambda x: m(x), args=lambda i: (xs(i, (3, 4)),),
                snap=lambda: [m.w.data if m.w is not None else None])


case("state_lazy_weight_tensor_built_inside")(_st_lazy_param_module)


def _st_partial_state():
    """Refusal of an append after some work: nothing left behind."""
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    hist = []

    def f(x, y):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        hist.append(len(hist))
        return loss
    return dict(f=f, args=lambda i: (xs(i, (5, 4)), xs(i, (5, 3), seed=1)),
                snap=model_snap(m, opt, extra=lambda: list(hist)))


case("state_history_append_after_step", refuse_ok=True)(_st_partial_state)


def _st_set_attr_constant_module():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3, rng=0)
            self.initialized = False

        def forward(self, x):
            if not self.initialized:
                self.initialized = True
            return self.lin(x) * (2 if self.initialized else 1)
    m = M()
    return dict(f=lambda x: m(x), args=lambda i: (xs(i, (2, 3)),),
                snap=model_snap(m, extra=lambda: m.initialized))


case("state_module_initialized_flag")(_st_set_attr_constant_module)


def _st_memo_fib():
    memo = {0: 0, 1: 1}

    def fib(n):
        if n not in memo:
            memo[n] = fib(n - 1) + fib(n - 2)
        return memo[n]

    def f(x):
        return x * fib(x.shape[0] + 5)
    return dict(f=f, args=_shape_args_vec, snap=lambda: dict(sorted(memo.items())))


case("state_memo_recursive_filled")(_st_memo_fib)


def _st_registry_decorator():
    registry = {}

    def f(x):
        if "gelu" not in registry:
            registry["gelu"] = F.gelu
        return registry["gelu"](x)
    return dict(f=f, args=lambda i: (xs(i, (3,)),), snap=lambda: list(registry))


case("state_registry_filled_inside")(_st_registry_decorator)


def _st_buffer_attr_numpy_inplace():
    """An np buffer attribute written in place inside (an EMA kept as plain NumPy)."""
    ema = {"v": np.zeros(3, np.float32)}

    def f(x):
        ema["v"] = 0.9 * ema["v"] + 0.1 * np.asarray(x).mean(0)
        return x - tt.tensor(ema["v"])
    return dict(f=f, args=lambda i: (xs(i, (4, 3)),), snap=lambda: dict(ema))


case("state_numpy_ema_rebound_inside", refuse_ok=True)(_st_buffer_attr_numpy_inplace)


def _st_mask_per_T_module_attr_dict():
    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(4, 4, rng=0)
            self._masks = {}

        def forward(self, x):
            T = x.shape[0]
            if T not in self._masks:
                self._masks[T] = np.triu(np.ones((T, T), bool), 1)
            s = tt.matmul(self.q(x), tt.transpose(x))
            s = tt.where(self._masks[T], -1e9, s)
            return tt.sum(tt.softmax(s) @ x)
    m = Attn()
    opt = tt.optim.Adam(m.parameters(), lr=0.01)

    def f(x):
        opt.zero_grad()
        loss = m(x)
        loss.backward()
        opt.step()
        return loss
    return dict(f=f, args=_shape_args, snap=model_snap(m, opt, extra=lambda: sorted(m._masks)))


case("state_masks_dict_in_attention_train_step")(_st_mask_per_T_module_attr_dict)


def _st_some_calls_holder(kind):
    """A flag set inside only on the calls whose batch is large, then read on later calls."""
    def build():
        lst = [1.0]

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3, rng=0)
                self.boost = 1.0

            def forward(self, x):
                y = self.lin(x)
                if kind == "module" and tt.max(tt.abs(y)) > 5:
                    self.boost = 2.0
                return y * self.boost
        m = M()

        def f(x):
            out = m(x)
            if kind == "list" and float(tt.sum(x)) > 20:
                lst[0] = 3.0
            return out * lst[0]

        def args(i):
            sc = 8.0 if i in (2, 9) else 1.0
            return (np.abs(xs(i, (4, 3))) * np.float32(sc),)
        return dict(f=f, args=args, snap=model_snap(m, extra=lambda: [m.boost, list(lst)]))
    return build


case("state_module_boost_set_on_big_call", refuse_ok=True)(_st_some_calls_holder("module"))
case("state_list_slot_set_on_big_call", refuse_ok=True)(_st_some_calls_holder("list"))


def _st_refusal_trace(kind):
    """Refused programs: nothing they set may stay set."""
    def build():
        class Obj:
            pass
        o = Obj()
        o.v = 0.0
        ns = types.SimpleNamespace(v=0.0, hist=[])

        def f(x, t):
            if kind == "obj_float_arg":
                o.v = t
            elif kind == "ns_float_arg":
                ns.v = t * 2
            elif kind == "obj_counter":
                o.v = o.v + 1
            elif kind == "ns_value":
                ns.v = float(tt.sum(x))
            return x * 2
        return dict(f=f, args=lambda i: (xs(i, (3,)), 0.5 + i),
                    snap=lambda: [dict(vars(o)), dict(vars(ns))])
    return build


for _k in ("obj_float_arg", "ns_float_arg", "obj_counter", "ns_value"):
    case(f"state_refusal_trace_{_k}", refuse_ok=True)(_st_refusal_trace(_k))


# ============================================================ (2) hyperparameters set inside from numbers


def _lr_val(i):
    return 0.1 * (0.5 + 0.5 * math.cos(math.pi * i / 40))


def _hp_case(name, optim="sgd", where="before_zero", groups="all", expr="lr", kind=float,
             sched=None, extra=None, ret_lr=None, refuse_ok=False, calls=12, xfail=None,
             change=None):
    def build():
        m = mlp()
        if groups == "two":
            params = [{"params": list(m[0].parameters())},
                      {"params": list(m[2].parameters()), "lr": 0.02}]
        else:
            params = m.parameters()
        if optim == "sgd":
            opt = tt.optim.SGD(params, lr=0.05, momentum=0.9)
        elif optim == "adam":
            opt = tt.optim.Adam(params, lr=0.01)
        elif optim == "adamw":
            opt = tt.optim.AdamW(params, lr=0.01, weight_decay=0.01)
        else:
            opt = tt.optim.RMSprop(params, lr=0.01)
        sch = None
        if sched == "step":
            sch = tt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        elif sched == "exp":
            sch = tt.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        elif sched == "cos":
            sch = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)

        def warmup(step):
            return min(1.0, (step + 1) / 5)

        def value(lr, step):
            if expr == "lr":
                return lr
            if expr == "half":
                return lr * 0.5
            if expr == "warmup":
                return lr * warmup(step)
            if expr == "div":
                return lr / 10
            if expr == "np_exp":
                return lr * np.exp(-0.1 * step)
            if expr == "one_minus":
                return 1 - lr
            if expr == "pow":
                return lr ** 2
            if expr == "int_step":
                return 0.01 * step
            raise AssertionError(expr)

        def setlr(lr, step):
            v = value(lr, step)
            gs = opt.param_groups if groups in ("all", "two") else opt.param_groups[:1]
            if groups == "second":
                gs = opt.param_groups[1:]
            for g in gs:
                g["lr"] = v
                if extra == "momentum" and "momentum" in g:
                    g["momentum"] = 1 - lr
                elif extra == "betas" and "betas" in g:
                    g["betas"] = (1 - lr, 0.999)
                elif extra == "wd":
                    g["weight_decay"] = lr * 0.1
                elif extra == "eps" and "eps" in g:
                    g["eps"] = lr * 1e-6

        def f(x, y, lr, step):
            out = []
            if ret_lr == "before_write":
                out.append(opt.param_groups[0]["lr"])
            if where == "before_zero":
                setlr(lr, step)
            opt.zero_grad()
            if where == "after_zero":
                setlr(lr, step)
            loss = F.mse_loss(m(x), y)
            loss.backward()
            if where == "after_backward":
                setlr(lr, step)
            if ret_lr == "after_write":
                out.append(opt.param_groups[0]["lr"])
            opt.step()
            if where == "after_step":
                setlr(lr, step)
            if sch is not None:
                sch.step()
            if ret_lr == "after_step":
                out.append(opt.param_groups[0]["lr"])
            return (loss, *out) if out else loss

        def args(i):
            lr = _lr_val(i)
            if kind is int:
                lr = 1 if i % 2 else 0
            elif kind is not float:
                lr = kind(lr)
            return (xs(i, (6, 4)), xs(i, (6, 3), seed=1), lr, i)

        def chg(i):
            if change == "momentum_outside":
                for g in opt.param_groups:
                    if "momentum" in g:
                        g["momentum"] = 0.5
            elif change == "lr_outside":
                opt.param_groups[0]["lr"] = 123.0
            elif change == "add_group":
                pass
        d = dict(f=f, args=args, snap=model_snap(m, opt, extra=lambda: sch.last_epoch
                                                 if sch is not None else None))
        if change:
            d["change"] = chg
        return d
    case(name, calls, xfail, refuse_ok)(build)


for _opt in ("sgd", "adam", "adamw", "rmsprop"):
    for _where in ("before_zero", "after_zero", "after_backward"):
        _hp_case(f"hp_{_opt}_lr_{_where}", optim=_opt, where=_where)
    _hp_case(f"hp_{_opt}_lr_after_step", optim=_opt, where="after_step", refuse_ok=True)

for _expr in ("half", "warmup", "div", "np_exp", "one_minus", "pow", "int_step"):
    _hp_case(f"hp_sgd_lr_expr_{_expr}", expr=_expr)
    _hp_case(f"hp_adam_lr_expr_{_expr}", optim="adam", expr=_expr)

_hp_case("hp_sgd_lr_np_float64", kind=np.float64)
_hp_case("hp_adam_lr_np_float64", optim="adam", kind=np.float64)
_hp_case("hp_sgd_lr_np_float32", kind=np.float32)
_hp_case("hp_adam_lr_np_float32", optim="adam", kind=np.float32)
_hp_case("hp_sgd_lr_int", kind=int)
_hp_case("hp_sgd_lr_int_half", kind=int, expr="half")

for _g in ("two", "first", "second"):
    _hp_case(f"hp_sgd_groups_{_g}", groups=_g)
    _hp_case(f"hp_adam_groups_{_g}", optim="adam", groups=_g)

# Found since (every case run, TT_COMPILE_ALL_ROUNDS=1): a learning rate written from a number
# argument and a StepLR stepping inside the same step: from the 2nd call the scheduler's result
# (its chainable form reads the group's lr) differs; f is recorded again on every call.
_LR_AND_STEPLR = ("a number argument written into param_groups and StepLR's step inside: the "
                  "scheduler's lr differs from the 2nd call")
for _s in ("step", "exp", "cos"):
    _hp_case(f"hp_sgd_lr_with_sched_{_s}", sched=_s, xfail=_LR_AND_STEPLR if _s == "step" else None)
    _hp_case(f"hp_adam_lr_with_sched_{_s}_two_groups", optim="adam", sched=_s, groups="two",
             xfail=_LR_AND_STEPLR if _s == "step" else None)
    _hp_case(f"hp_sgd_lr_with_sched_{_s}_read_after_step", sched=_s, ret_lr="after_step",
             refuse_ok=True)

_hp_case("hp_sgd_momentum_too", extra="momentum")
_hp_case("hp_adam_betas_too", optim="adam", extra="betas")
_hp_case("hp_adamw_weight_decay_too", optim="adamw", extra="wd")
_hp_case("hp_sgd_weight_decay_too", extra="wd")
_hp_case("hp_adam_eps_too", optim="adam", extra="eps")
_hp_case("hp_rmsprop_momentum_too", optim="rmsprop", extra="momentum")
_hp_case("hp_sgd_momentum_after_backward", extra="momentum", where="after_backward")

_hp_case("hp_sgd_read_lr_before_write", ret_lr="before_write")
_hp_case("hp_sgd_read_lr_after_write", ret_lr="after_write")
_hp_case("hp_adam_read_lr_after_write_half", optim="adam", ret_lr="after_write", expr="half")
_hp_case("hp_sgd_read_lr_after_step_no_sched", ret_lr="after_step")
_hp_case("hp_sgd_momentum_changed_outside", change="momentum_outside")
_hp_case("hp_sgd_lr_changed_outside_overwritten", change="lr_outside")
_hp_case("hp_sgd_long_cosine", calls=42)
_hp_case("hp_adam_long_warmup_sched", optim="adam", expr="warmup", sched="step", calls=42)


def _hp_lr_from_container(kind):
    def build():
        m = mlp()
        opt = tt.optim.SGD(m.parameters(), lr=0.05)

        def f(x, y, hp):
            opt.param_groups[0]["lr"] = hp["lr"] if kind == "dict" else hp[0]
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss

        def args(i):
            lr = _lr_val(i)
            return (xs(i, (6, 4)), xs(i, (6, 3), seed=1), {"lr": lr} if kind == "dict" else [lr])
        return dict(f=f, args=args, snap=model_snap(m, opt))
    return build


case("hp_lr_from_dict_argument")(_hp_lr_from_container("dict"))
case("hp_lr_from_list_argument")(_hp_lr_from_container("list"))


def _hp_lr_constant_inside():
    """Written from a constant (not an argument): the guide says refused."""
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.05)

    def f(x, y):
        opt.param_groups[0]["lr"] = 0.01
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        return loss
    return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1)),
                snap=model_snap(m, opt))


case("hp_lr_set_from_constant_inside", refuse_ok=True)(_hp_lr_constant_inside)


def _hp_lr_from_loss_value():
    """An adaptive lr computed from the loss after backward: refused (value after backward)."""
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.05)

    def f(x, y, lr):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.param_groups[0]["lr"] = lr if float(loss) < 1 else lr * 0.1
        opt.step()
        return loss
    return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1) * (3 if i > 5 else 1),
                                     _lr_val(i)), snap=model_snap(m, opt))


case("hp_lr_from_loss_value_after_backward", refuse_ok=True)(_hp_lr_from_loss_value)


def _hp_two_optimizers():
    g = mlp()
    d = mlp(3, 1)
    og = tt.optim.Adam(g.parameters(), lr=0.01)
    od = tt.optim.SGD(d.parameters(), lr=0.01)

    def f(x, lr_g, lr_d):
        og.param_groups[0]["lr"] = lr_g
        od.param_groups[0]["lr"] = lr_d
        od.zero_grad()
        ld = tt.mean(d(g(x).detach()) ** 2)
        ld.backward()
        od.step()
        og.zero_grad()
        lg = -tt.mean(d(g(x)))
        lg.backward()
        og.step()
        return ld, lg
    return dict(f=f, args=lambda i: (xs(i, (5, 4)), _lr_val(i), 0.5 * _lr_val(i)),
                snap=lambda: [module_state(g), module_state(d), opt_state(og), opt_state(od)])


case("hp_two_optimizers_lr_args")(_hp_two_optimizers)


def _hp_lr_and_sched_lambda():
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.05)
    sch = tt.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0 / (1 + e))

    def f(x, y, lr):
        opt.param_groups[0]["lr"] = lr
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        sch.step()
        return loss
    return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1), _lr_val(i)),
                snap=model_snap(m, opt, extra=lambda: [sch.last_epoch, sch.get_last_lr()]))


case("hp_lr_written_with_lambda_lr")(_hp_lr_and_sched_lambda)


def _hp_initial_lr_written():
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.05)
    sch = tt.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)

    def f(x, y, lr):
        opt.param_groups[0]["initial_lr"] = lr
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        sch.step()
        return loss
    return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1), _lr_val(i)),
                snap=model_snap(m, opt, extra=lambda: sch.last_epoch))


case("hp_initial_lr_written_with_steplr", refuse_ok=True)(_hp_initial_lr_written)


def _hp_lr_tensor_lr_update():
    """The functional update with lr: no optimizer, lr read from a param_groups-like dict."""
    w = tt.tensor(np.linspace(-1, 1, 12).reshape(4, 3).astype(np.float32), requires_grad=True)
    hp = {"lr": 0.1}

    def f(x, lr):
        hp["lr"] = lr
        loss = tt.sum(tt.matmul(x, w) ** 2)
        g = tt.grad(lambda W: tt.sum(tt.matmul(x, W) ** 2))(w.data)
        with tt.no_grad():
            w.sub_(g * hp["lr"])
        return loss.detach()
    return dict(f=f, args=lambda i: (xs(i, (5, 4)), _lr_val(i)),
                snap=lambda: [w.data, dict(hp)])


case("hp_plain_dict_lr_written_then_used", refuse_ok=True)(_hp_lr_tensor_lr_update)


def _hp_betas(form):
    def build():
        m = mlp()
        opt = tt.optim.Adam(m.parameters(), lr=0.01)

        def f(x, y, b1, lr):
            g = opt.param_groups[0]
            if form == "arg_tuple":
                g["betas"] = (b1, 0.999)
            elif form == "second_expr":
                g["betas"] = (0.9, 1 - lr * 0.01)
            elif form == "list":
                g["betas"] = [b1, 0.999]
            elif form == "lr_and_eps":
                g["lr"] = lr
                g["eps"] = 1e-8 * (1 + lr)
            elif form == "momentum_expr_sgd":
                g["lr"] = lr
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss
        return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1), 0.8 + 0.01 * i,
                                         _lr_val(i)), snap=model_snap(m, opt))
    return build


for _f in ("arg_tuple", "second_expr", "list", "lr_and_eps"):
    case(f"hp_adam_betas_form_{_f}")(_hp_betas(_f))


def _hp_lr_read_before_write(kind):
    def build():
        m = mlp()
        opt = tt.optim.SGD(m.parameters(), lr=0.05)

        def f(x, y, lr):
            prev = opt.param_groups[0]["lr"]
            opt.param_groups[0]["lr"] = lr
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            if kind == "ratio":
                return loss, lr / prev
            if kind == "scaled_loss":
                return loss * prev
            return loss, prev
        return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1), _lr_val(i)),
                    snap=model_snap(m, opt))
    return build


for _k in ("ratio", "scaled_loss"):
    case(f"hp_read_previous_lr_{_k}")(_hp_lr_read_before_write(_k))


def _hp_lr_after_step_variant(kind):
    def build():
        m = mlp()
        opt = tt.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        sch = tt.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)

        def f(x, y, lr):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            if kind == "after_sched":
                sch.step()
                opt.param_groups[0]["lr"] = lr
            elif kind == "momentum_after":
                opt.param_groups[0]["momentum"] = 1 - lr
            elif kind == "before_sched":
                opt.param_groups[0]["lr"] = lr
                sch.step()
            return loss
        return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1), _lr_val(i)),
                    snap=model_snap(m, opt, extra=lambda: sch.last_epoch))
    return build


for _k in ("after_sched", "momentum_after", "before_sched"):
    case(f"hp_written_after_step_{_k}", refuse_ok=True)(_hp_lr_after_step_variant(_k))


# ============================================================ (3) large held arrays, changed in place


def _big(seed=7, shape=(128, 48), dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


_BIG_CHANGES = {
    "add_all": lambda X, i: X.__iadd__(np.float32(0.5)),
    "one_elem_last": lambda X, i: X.__setitem__((-1, -1), X[-1, -1] + 7),
    "one_elem_first": lambda X, i: X.__setitem__((0, 0), np.float32(100 + i)),
    "middle_row": lambda X, i: X.__setitem__(len(X) // 2, X[len(X) // 2] * 3),
    "scale": lambda X, i: X.__imul__(np.float32(2)),
    "view_write": lambda X, i: X[10:20, 5:].__iadd__(np.float32(1)),
    "last_col": lambda X, i: X.__setitem__((slice(None), -1), np.float32(i)),
}


_BIG_BODIES = {
    # a line of the program reads X, and NumPy code in f computes on X
    "center_index": lambda X, idx, w: tt.matmul(tt.tensor(X - X.mean(0))[idx], w),
    "standardize": lambda X, idx, w: tt.matmul(tt.tensor((X - X.mean(0)) / (X.std(0) + 1e-6))[idx],
                                               w),
    "absmax_scale": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) / float(np.abs(X).max()),
    "norm_scale": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) * np.linalg.norm(X),
    "head_slice": lambda X, idx, w: tt.matmul(tt.tensor(X[:10] * 2), w) + tt.tensor(X)[idx][:1] @ w,
    "first_elem": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) * float(X[0, 0]),
    "xt_v": lambda X, idx, w: tt.sum(tt.matmul(tt.tensor(X)[idx], w)) + tt.tensor(X.T @ X[:, 0]),
    "ufunc_view": lambda X, idx, w: tt.matmul(tt.tensor(np.exp(X[:, :48] * 0.1))[idx], w),
    "row_norms": lambda X, idx, w: tt.matmul(
        tt.tensor(X / np.linalg.norm(X, axis=1, keepdims=True))[idx], w),
    "mean_only_plus_read": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx] - tt.tensor(X.mean(0)), w),
    "minmax": lambda X, idx, w: tt.matmul((tt.tensor(X)[idx] - X.min()) / (X.max() - X.min()), w),
    "last_elem": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) + float(X[-1, -1]),
    "col_sum_last": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) * X[:, -1].sum(),
    "int_index_elem": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) * X[3, 4],
    "item": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) + X.item(0),
    "ravel_first": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) - X.ravel()[0],
    "total_sum": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) * X.sum(),
    "trace": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) * np.trace(X),
    "row0_tensor": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx] + tt.tensor(X[0]), w),
    "tolist_elem": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) * X[0].tolist()[0],
    "head_copy": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx] + tt.tensor(X[:6].copy()), w),
    "dot_head": lambda X, idx, w: tt.matmul(tt.tensor(X)[idx], w) + tt.tensor(np.dot(X[:6], X[0])[:, None]),
    "slice_read": lambda X, idx, w: tt.matmul(tt.tensor(X[5:40]), w)[:3] * X[5:40].var(),
}


def _big_case(body, change, holder="closure", calls=12, xfail=None, suffix=""):
    def build():
        X = _big()
        w = tt.tensor(np.linspace(-1, 1, 48 * 3).reshape(48, 3).astype(np.float32),
                      requires_grad=True)
        fn = _BIG_BODIES[body]

        class Holder(nn.Module):
            def __init__(self):
                super().__init__()
                self.P = X

        hold = Holder()
        lst = [X]
        ns = types.SimpleNamespace(data=X)

        def get():
            if holder == "closure":
                return X
            if holder == "module":
                return hold.P
            if holder == "list":
                return lst[0]
            return ns.data

        def f(idx):
            return fn(get(), idx, w)

        def change_(i):
            _BIG_CHANGES[change](X, i)
        return dict(f=f, args=lambda i: (ints(i, 6, 128),), change=change_,
                    snap=lambda: [X, w.data, w.grad])
    case(f"big_{body}_{change}_{holder}{suffix}", calls, xfail)(build)


for _b in _BIG_BODIES:
    for _c in ("add_all", "one_elem_last"):
        _big_case(_b, _c)
for _b in ("center_index", "absmax_scale", "first_elem", "last_elem", "col_sum_last",
           "slice_read", "standardize"):
    for _c in ("one_elem_first", "middle_row", "scale", "view_write", "last_col"):
        _big_case(_b, _c)
for _b in ("int_index_elem", "item", "ravel_first", "total_sum", "trace", "row0_tensor",
           "tolist_elem", "head_copy", "dot_head"):
    _big_case(_b, "one_elem_first")
for _h in ("module", "list", "namespace"):
    for _b in ("center_index", "absmax_scale", "last_elem", "norm_scale"):
        _big_case(_b, "one_elem_last", holder=_h)
_big_case("standardize", "middle_row", calls=42, suffix="_long")


_GLOBAL_BIG = _big(seed=11)


def _big_global():
    w = tt.tensor(np.ones((48, 2), np.float32), requires_grad=True)
    start = _GLOBAL_BIG.copy()

    def f(idx):
        Xc = _GLOBAL_BIG - _GLOBAL_BIG.mean(0)
        return tt.sum(tt.matmul(tt.tensor(Xc)[idx], w)) + tt.sum(tt.tensor(_GLOBAL_BIG)[idx])

    def change(i):
        _GLOBAL_BIG[-1, :] += 1
    d = dict(f=f, args=lambda i: (ints(i, 4, 128),), change=change,
             snap=lambda: [_GLOBAL_BIG, w.data])
    _GLOBAL_BIG[...] = start
    return d


case("big_global_center_and_read_last_row")(_big_global)


def _big_train_step(kind):
    def build():
        X = _big(seed=3, shape=(256, 20))
        Y = np.random.default_rng(4).integers(0, 3, 256)
        m = nn.Linear(20, 3, rng=0)
        opt = tt.optim.SGD(m.parameters(), lr=0.1)

        def f(idx):
            if kind == "standardize":
                Xn = (X - X.mean(0)) / X.std(0)
                xb = tt.tensor(Xn)[idx]
            elif kind == "absmax":
                xb = tt.tensor(X)[idx] / np.abs(X).max()
            else:
                xb = tt.tensor(X[idx] - X.mean(0))
            opt.zero_grad()
            loss = F.cross_entropy(m(xb), Y[idx])
            loss.backward()
            opt.step()
            return loss

        def change(i):
            if kind == "labels":
                Y[:] = (Y + 1) % 3
            X[-1, -1] += 5.0
            X[int(ints(i, 1, 256)[0])] *= 2
        return dict(f=f, args=lambda i: (ints(i, 16, 256),), change=change,
                    snap=model_snap(m, opt, extra=lambda: [X, Y]))
    return build


for _k in ("standardize", "absmax", "fancy", "labels"):
    case(f"big_train_step_{_k}")(_big_train_step(_k))


def _big_int_table():
    T = np.random.default_rng(5).integers(0, 50, 6000)
    emb = nn.Embedding(50, 4, rng=0)

    def f(idx):
        counts = np.bincount(T, minlength=50).astype(np.float32)
        return tt.sum(emb(T[idx])) + tt.sum(tt.tensor(counts[:4]))

    def change(i):
        T[-1] = (T[-1] + 1) % 50
        T[0] = 49
    return dict(f=f, args=lambda i: (ints(i, 5, 6000),), change=change,
                snap=model_snap(emb, extra=lambda: T))


case("big_int_table_bincount_and_index")(_big_int_table)


def _big_float64_only_numpy():
    """Only NumPy code reads X (no program line): guarded by value."""
    X = _big(seed=9, dtype=np.float64)

    def f(v):
        mu = X.mean(0)
        return v * tt.tensor(mu[:48]) + float(np.abs(X).max())

    def change(i):
        X[-1, -1] += 3
    return dict(f=f, args=lambda i: (xs(i, (48,), np.float64),), change=change, snap=lambda: [X])


case("big_numpy_only_stats_last_elem")(_big_float64_only_numpy)


def _big_rebind_global_like():
    box = {"X": _big(seed=12)}

    def f(idx):
        X = box["X"]
        return tt.sum(tt.tensor(X)[idx]) * X.mean()

    def change(i):
        box["X"] = box["X"] + 1
    return dict(f=f, args=lambda i: (ints(i, 4, 128),), change=change, snap=lambda: dict(box))


case("big_rebound_in_dict_mean")(_big_rebind_global_like)


def _big_dataset_class():
    class DS:
        def __init__(self):
            self.X = _big(seed=13)
            self.mu = self.X.mean(0)

        def batch(self, idx):
            return (self.X[idx] - self.X.mean(0)) * 1.0
    ds = DS()
    lin = nn.Linear(48, 2, rng=0)

    def f(idx):
        return tt.sum(lin(tt.tensor(ds.batch(idx))))

    def change(i):
        ds.X[3] += 1
    return dict(f=f, args=lambda i: (ints(i, 4, 128),), change=change,
                snap=model_snap(lin, extra=lambda: ds.X))


case("big_dataset_method_centers_batch")(_big_dataset_class)


def _big_module_forward_elem(kind):
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.P = _big(seed=21, shape=(96, 64))
            self.lin = nn.Linear(64, 2, rng=0)

        def forward(self, idx):
            xb = tt.tensor(self.P)[idx]
            if kind == "elem":
                return self.lin(xb) * float(self.P[0, 0])
            if kind == "row_head":
                return self.lin(xb + tt.tensor(self.P[0]))
            if kind == "first_rows_mean":
                return self.lin(xb - tt.tensor(self.P[:8].mean(0)))
            return self.lin(xb) / float(np.abs(self.P).max())

    def build():
        m = Scaled()
        opt = tt.optim.SGD(m.parameters(), lr=0.1)

        def f(idx):
            opt.zero_grad()
            loss = tt.mean(m(idx) ** 2)
            loss.backward()
            opt.step()
            return loss

        def change(i):
            m.P[0] += 1.0
        return dict(f=f, args=lambda i: (ints(i, 8, 96),), change=change,
                    snap=model_snap(m, opt, extra=lambda: m.P))
    return build


for _k in ("elem", "row_head", "first_rows_mean", "absmax"):
    case(f"big_module_train_step_{_k}_first_row_changed")(_big_module_forward_elem(_k))


def _big_elem_number_index():
    X = _big(seed=22)

    def f(idx, r, c):
        return tt.sum(tt.tensor(X)[idx]) * X[r, c]

    def change(i):
        X[...] *= np.float32(1.5)
    return dict(f=f, args=lambda i: (ints(i, 4, 128), 1, 2), change=change, snap=lambda: [X])


case("big_elem_at_int_arguments")(_big_elem_number_index)


# ============================================================ (4) callables reached indirectly, configs


def _call_case(name, make, xfail=None, calls=12):
    """make() -> (f, change(i)); f(x) on a (3, 4) float32 argument."""
    def build():
        f, change = make()
        return dict(f=f, args=lambda i: (xs(i, (3, 4)),), change=change)
    case(name, calls, xfail)(build)


def _mk_dict_fn():
    ops = {"act": tt.tanh}

    def f(x):
        return ops["act"](x) * 2

    def change(i):
        ops["act"] = {2: tt.relu, 9: tt.sigmoid, 39: tt.tanh}[i]
    return f, change


def _mk_list_fn():
    fns = [tt.tanh, tt.exp]

    def f(x):
        out = x
        for fn in fns:
            out = fn(out)
        return out

    def change(i):
        fns[0] = tt.sigmoid if i == 2 else tt.relu
    return f, change


def _mk_nested_dict_fn():
    cfg = {"model": {"layers": [{"act": tt.tanh}, {"act": tt.relu}]}}

    def f(x):
        for layer in cfg["model"]["layers"]:
            x = layer["act"](x)
        return x

    def change(i):
        cfg["model"]["layers"][1]["act"] = tt.sigmoid if i == 2 else tt.exp
    return f, change


def _mk_obj_attr_fn():
    class Holder:
        pass
    h = Holder()
    h.fn = tt.tanh

    def f(x):
        return h.fn(x) + 1

    def change(i):
        h.fn = tt.sin if i == 2 else tt.cos
    return f, change


def _mk_obj_deep_attr_fn():
    root = types.SimpleNamespace(sub=types.SimpleNamespace(leaf=types.SimpleNamespace(fn=tt.tanh)))

    def f(x):
        return root.sub.leaf.fn(x)

    def change(i):
        root.sub.leaf = types.SimpleNamespace(fn=tt.sigmoid if i == 2 else tt.exp)
    return f, change


def _mk_attrgetter():
    import operator
    m = nn.Linear(4, 2, rng=0)
    get = operator.attrgetter("weight")

    def f(x):
        return tt.matmul(x, tt.transpose(get(m)))

    def change(i):
        m.weight.data = m.weight.data * 2
    return f, change


def _mk_attrgetter_name_swapped():
    import operator
    m = nn.Linear(4, 4, rng=0)
    m.other = nn.Parameter(np.eye(4, dtype=np.float32)) if hasattr(nn, "Parameter") else None
    box = {"get": operator.attrgetter("weight")}

    def f(x):
        return tt.matmul(x, box["get"](m))

    def change(i):
        box["get"] = operator.attrgetter("other" if i == 2 else "weight")
    return f, change


def _mk_methodcaller():
    import operator
    box = {"red": operator.methodcaller("sum", axis=0)}

    def f(x):
        return box["red"](x * 2)

    def change(i):
        box["red"] = operator.methodcaller("mean", axis=1) if i == 2 else \
            operator.methodcaller("sum", axis=1)
    return f, change


def _mk_methodcaller_kw_same_obj():
    import operator
    red = operator.methodcaller("sum", axis=0)
    box = [red]

    def f(x):
        return box[0](x) * 3

    def change(i):
        box[0] = operator.methodcaller("sum", axis=1)
    return f, change


def _mk_class_swap():
    class A:
        def act(self, x):
            return tt.tanh(x)

    class B:
        def act(self, x):
            return tt.sigmoid(x)
    o = A()

    def f(x):
        return o.act(x) * 2

    def change(i):
        o.__class__ = B if i == 2 else A
    return f, change


def _mk_class_method_replaced():
    class A:
        def act(self, x):
            return tt.tanh(x)
    o = A()

    def f(x):
        return o.act(x)

    def change(i):
        A.act = (lambda self, x: tt.relu(x)) if i == 2 else (lambda self, x: x * 3)
    return f, change


def _mk_instance_method_shadow():
    class A:
        def act(self, x):
            return tt.tanh(x)
    o = A()

    def f(x):
        return o.act(x)

    def change(i):
        o.act = (lambda x: tt.relu(x)) if i == 2 else (lambda x: x * 3)
    return f, change


def _mk_submodule_attr_fn():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4, rng=0)
            self.act_fn = F.relu

        def forward(self, x):
            return self.act_fn(self.lin(x))
    net = nn.Sequential(Block(), nn.Linear(4, 2, rng=1))

    def f(x):
        return net(x)

    def change(i):
        net[0].act_fn = F.gelu if i == 2 else tt.tanh
    return f, change


def _mk_submodule_attr_fn_read_outside():
    """The function is read off a submodule by a helper outside the module's forward."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4, rng=0)
            self.post = tt.tanh

        def forward(self, x):
            return self.lin(x)
    net = nn.Sequential(Block())

    def post(model, y):
        return model[0].post(y)

    def f(x):
        return post(net, net(x))

    def change(i):
        net[0].post = tt.sigmoid if i == 2 else tt.exp
    return f, change


def _mk_partial_kw_mutated():
    p = functools.partial(F.leaky_relu, negative_slope=0.1)

    def f(x):
        return p(x)

    def change(i):
        p.keywords["negative_slope"] = 0.3 if i == 2 else 0.5
    return f, change


def _mk_partial_in_dict():
    acts = {"a": functools.partial(tt.clip, a_min=-0.5, a_max=0.5)} if hasattr(tt, "clip") else \
        {"a": functools.partial(F.leaky_relu, negative_slope=0.2)}

    def f(x):
        return acts["a"](x)

    def change(i):
        acts["a"] = functools.partial(F.leaky_relu, negative_slope=0.05 * i)
    return f, change


def _mk_getattr_name_from_cfg():
    cfg = types.SimpleNamespace(act="tanh")

    def f(x):
        return getattr(tt, cfg.act)(x)

    def change(i):
        cfg.act = "sigmoid" if i == 2 else "exp"
    return f, change


def _mk_default_fn():
    def f(x, act=tt.tanh):
        return act(x)

    def change(i):
        f.__defaults__ = (tt.sigmoid if i == 2 else tt.relu,)
    return f, change


def _mk_closure_of_closure():
    def make(fn):
        def inner(x):
            return fn(x) * 2
        return inner
    box = {"g": make(tt.tanh)}

    def f(x):
        return box["g"](x)

    def change(i):
        box["g"] = make(tt.sigmoid if i == 2 else tt.exp)
    return f, change


def _mk_callable_object_state():
    class Scale:
        def __init__(self, s):
            self.s = s

        def __call__(self, x):
            return x * self.s
    sc = Scale(2.0)
    pipe = [sc]

    def f(x):
        return pipe[0](x)

    def change(i):
        sc.s = 3.0 if i == 2 else -1.5
    return f, change


def _mk_callable_object_nested_cfg():
    @dataclasses.dataclass
    class Inner:
        scale: float = 2.0
        shift: list = dataclasses.field(default_factory=lambda: [0.0, 1.0])

    @dataclasses.dataclass
    class Outer:
        inner: Inner = dataclasses.field(default_factory=Inner)
    cfg = Outer()

    def f(x):
        return x * cfg.inner.scale + cfg.inner.shift[1]

    def change(i):
        cfg.inner.shift[1] = float(i)
        if i == 9:
            cfg.inner.scale = 5.0
    return f, change


def _mk_module_cfg_dict():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4, rng=0)
            self.cfg = {"scale": 1.0, "act": tt.tanh}

        def forward(self, x):
            return self.lin(x)
    m = M()

    def f(x):
        return m.cfg["act"](m(x)) * m.cfg["scale"]

    def change(i):
        m.cfg["scale"] = 2.0 * i
        m.cfg["act"] = tt.sigmoid
    return f, change


def _mk_module_cfg_namespace_in_submodule():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(4, 4, rng=0)
            self.enc.cfg = types.SimpleNamespace(dropout=0.0, temp=1.0)

        def forward(self, x):
            return self.enc(x)
    m = M()

    def helper(y):
        return y / m.enc.cfg.temp

    def f(x):
        return helper(m(x))

    def change(i):
        m.enc.cfg.temp = 0.5 * i
    return f, change


def _mk_global_registry_fn():
    def f(x):
        return _REG["act"](x) + _REG["bias"]

    def change(i):
        _REG["act"] = tt.sigmoid if i == 2 else tt.tanh
        _REG["bias"] = float(i)
    _REG.update(act=tt.tanh, bias=0.0)
    return f, change


_REG = {}


def _mk_staticmethod_swap():
    class Ops:
        @staticmethod
        def act(x):
            return tt.tanh(x)
    o = Ops()

    def f(x):
        return o.act(x)

    def change(i):
        Ops.act = staticmethod(tt.sigmoid if i == 2 else tt.exp)
    return f, change


def _mk_property_cfg():
    class C:
        def __init__(self):
            self._t = 1.0

        @property
        def t(self):
            return self._t * 2
    c = C()

    def f(x):
        return x / c.t

    def change(i):
        c._t = float(i)
    return f, change


def _mk_dispatch_table_by_string():
    table = {"tanh": tt.tanh, "relu": tt.relu}
    cfg = {"name": "tanh"}

    def f(x):
        return table[cfg["name"]](x)

    def change(i):
        if i == 2:
            cfg["name"] = "relu"
        else:
            table["relu"] = tt.sigmoid
    return f, change


def _mk_bound_method_of_other_module():
    a = nn.Linear(4, 4, rng=0)
    b = nn.Linear(4, 4, rng=1)
    box = {"fwd": a.forward}

    def f(x):
        return box["fwd"](x)

    def change(i):
        box["fwd"] = b.forward if i == 2 else a.__call__
    return f, change


def _mk_tuple_of_fns_attr():
    class Pipe:
        steps = (tt.tanh, tt.exp)
    p = Pipe()

    def f(x):
        for s in p.steps:
            x = s(x)
        return x

    def change(i):
        Pipe.steps = (tt.sigmoid,) if i == 2 else (tt.relu, tt.tanh, tt.exp)
    return f, change


def _mk_lambda_closure_cell_changed():
    k = [2.0]
    fn = (lambda y: y * k[0])
    box = {"fn": fn}

    def f(x):
        return box["fn"](x)

    def change(i):
        k[0] = float(i)
    return f, change


def _mk_enum_like_mode():
    import enum

    class Mode(enum.Enum):
        A = "a"
        B = "b"
    st = types.SimpleNamespace(mode=Mode.A)

    def f(x):
        return x * 2 if st.mode is Mode.A else x * 3

    def change(i):
        st.mode = Mode.B if i == 2 else Mode.A
    return f, change


for _n, _m in [("dict_fn", _mk_dict_fn), ("list_fn", _mk_list_fn),
               ("nested_dict_fn", _mk_nested_dict_fn), ("obj_attr_fn", _mk_obj_attr_fn),
               ("deep_namespace_fn", _mk_obj_deep_attr_fn), ("attrgetter", _mk_attrgetter),
               ("attrgetter_swapped", _mk_attrgetter_name_swapped),
               ("methodcaller_swapped", _mk_methodcaller),
               ("methodcaller_in_list", _mk_methodcaller_kw_same_obj),
               ("class_swap", _mk_class_swap), ("class_method_replaced", _mk_class_method_replaced),
               ("instance_method_shadow", _mk_instance_method_shadow),
               ("submodule_attr_fn", _mk_submodule_attr_fn),
               ("submodule_attr_fn_read_outside", _mk_submodule_attr_fn_read_outside),
               ("partial_keywords_mutated", _mk_partial_kw_mutated),
               ("partial_in_dict", _mk_partial_in_dict),
               ("getattr_name_from_cfg", _mk_getattr_name_from_cfg),
               ("default_fn", _mk_default_fn), ("closure_of_closure", _mk_closure_of_closure),
               ("callable_object_state", _mk_callable_object_state),
               ("nested_dataclass_cfg", _mk_callable_object_nested_cfg),
               ("module_cfg_dict", _mk_module_cfg_dict),
               ("submodule_namespace_cfg_helper", _mk_module_cfg_namespace_in_submodule),
               ("global_registry", _mk_global_registry_fn),
               ("staticmethod_swap", _mk_staticmethod_swap), ("property_cfg", _mk_property_cfg),
               ("dispatch_by_string", _mk_dispatch_table_by_string),
               ("bound_method_other_module", _mk_bound_method_of_other_module),
               ("class_tuple_of_fns", _mk_tuple_of_fns_attr),
               ("lambda_reads_list_cell", _mk_lambda_closure_cell_changed),
               ("enum_mode", _mk_enum_like_mode)]:
    _call_case(f"call_{_n}", _m)


# ============================================================ (5) what else a torch.compile user tries


def _v_branch_loss_state():
    """if loss > 1: lr halves: a value-dependent branch setting a number read by the update."""
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.1)

    def f(x, y):
        opt.zero_grad()
        out = m(x)
        loss = F.mse_loss(out, y)
        scale = 0.5 if loss > 1 else 1.0
        (loss * scale).backward()
        opt.step()
        return loss
    return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1) * (3 if i % 3 else 1)),
                snap=model_snap(m, opt))


case("ctl_loss_branch_scales_backward")(_v_branch_loss_state)


def _v_while_newton():
    def f(a):
        x = a
        n = 0
        while float(tt.max(tt.abs(x * x - a))) > 1e-3 and n < 20:
            x = 0.5 * (x + a / x)
            n += 1
        return x, n
    return dict(f=f, args=lambda i: (np.abs(xs(i, (3,))) + 0.5 + (5 if i in (2, 9) else 0),))


case("ctl_while_newton_returns_count")(_v_while_newton)


def _v_early_exit_nan():
    def f(x):
        y = tt.log(x)
        if not bool(tt.all(tt.isfinite(y))) if hasattr(tt, "isfinite") else False:
            return tt.zeros_like(x) if hasattr(tt, "zeros_like") else x * 0
        return y * 2
    return dict(f=f, args=lambda i: (xs(i, (4,)) if i in (2, 9) else np.abs(xs(i, (4,))) + 0.1,))


case("ctl_early_exit_on_nonfinite")(_v_early_exit_nan)


def _v_grad_closed_model_outside_backward():
    m = mlp()
    opt = tt.optim.Adam(m.parameters(), lr=0.01)
    loss_fn = tt.compile(lambda x, y: F.mse_loss(m(x), y))

    def f(x, y):
        return loss_fn(x, y)

    def outer(cf):
        def step(x, y):
            opt.zero_grad()
            loss = cf(x, y)
            (loss + 0.01 * tt.sum(m[0].weight ** 2)).backward()
            opt.step()
            return loss
        return step
    return dict(f=lambda x, y: F.mse_loss(m(x), y), args=lambda i: (xs(i, (6, 4)),
                xs(i, (6, 3), seed=1)), wrap_outer=outer, snap=model_snap(m, opt))


case("grad_closed_model_regulariser_outside")(_v_grad_closed_model_outside_backward)


def _v_wdata_rebind():
    w = tt.tensor(np.linspace(-1, 1, 12).reshape(4, 3).astype(np.float32), requires_grad=True)

    def f(x):
        loss = tt.sum(tt.tanh(tt.matmul(x, w)) ** 2)
        return loss

    def outer(cf):
        def step(x):
            w.grad = None
            loss = cf(x)
            loss.backward()
            w.data = w.data - 0.1 * w.grad
            return loss
        return step
    return dict(f=f, args=lambda i: (xs(i, (5, 4)),), wrap_outer=outer,
                snap=lambda: [w.data, w.grad])


case("wdata_lecture_rebind_each_step")(_v_wdata_rebind)


def _v_model_to_dtype():
    m = mlp()

    def f(x):
        return m(x) * 2

    def change(i):
        m.to(np.float64 if i == 2 else np.float32)
    return dict(f=f, args=lambda i: (xs(i, (3, 4)),), change=change, snap=model_snap(m))


case("model_to_dtype_and_back")(_v_model_to_dtype)


def _v_mask_per_batch():
    lin = nn.Linear(4, 4, rng=0)

    def f(x, lengths):
        T = x.shape[0]
        mask = np.arange(T)[:, None] < lengths[None, :]
        s = tt.matmul(lin(x), tt.transpose(x))
        return tt.softmax(tt.where(mask, s, -1e9))
    return dict(f=f, args=lambda i: (xs(i, (5, 4)), ints(i, 5, 5) + 1), snap=model_snap(lin))


case("mask_per_batch_from_lengths")(_v_mask_per_batch)


def _v_dropout_train_eval_step(mode_change):
    def build():
        m = nn.Sequential(nn.Linear(4, 8, rng=0), nn.Dropout(0.3), nn.Linear(8, 3, rng=1))
        opt = tt.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def f(x, y):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss

        def change(i):
            if mode_change:
                m.train(i != 2)
            else:
                m[1].p = 0.6
        return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1)), change=change,
                    snap=model_snap(m, opt))
    return build


case("rand_dropout_step_mode_changed_outside")(_v_dropout_train_eval_step(True))
case("rand_dropout_step_p_changed_outside")(_v_dropout_train_eval_step(False))


def _v_randn_generator_arg():
    def f(x, g):
        return x + tt.randn(*x.shape, rng=g, dtype=np.float32)
    gen = np.random.default_rng(3)
    return dict(f=f, args=lambda i: (xs(i, (3,)), gen))


case("rand_randn_with_passed_generator_shared")(_v_randn_generator_arg)


def _v_batchnorm_momentum_outside():
    m = nn.Sequential(nn.Linear(4, 6, rng=0), nn.BatchNorm1d(6), nn.Linear(6, 2, rng=1))
    opt = tt.optim.SGD(m.parameters(), lr=0.1)

    def f(x):
        opt.zero_grad()
        loss = tt.mean(m(x) ** 2)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        m[1].momentum = 0.5 if i == 2 else None
    return dict(f=f, args=lambda i: (xs(i, (8, 4)),), change=change, snap=model_snap(m, opt))


case("bn_momentum_changed_outside_to_none")(_v_batchnorm_momentum_outside)


def _v_param_requires_grad_toggle():
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.1)

    def f(x, y):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        m[0].weight.requires_grad = (i != 2)
    return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1)), change=change,
                snap=model_snap(m, opt))


case("freeze_first_layer_outside")(_v_param_requires_grad_toggle)


def _v_ema_step():
    m = mlp()
    ema = mlp()
    opt = tt.optim.Adam(m.parameters(), lr=0.01)

    def f(x, y, decay):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        with tt.no_grad():
            for pe, p in zip(ema.parameters(), m.parameters()):
                pe.mul_(decay).add_(p * (1 - decay))
        return loss
    return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1), 0.9 + 0.001 * i),
                snap=lambda: [module_state(m), module_state(ema), opt_state(opt)])


case("ema_decay_float_arg")(_v_ema_step)


def _v_grad_accum_microbatches():
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.1)

    def f(xs_, ys_):
        opt.zero_grad()
        total = 0
        for x, y in zip(xs_, ys_):
            loss = F.mse_loss(m(x), y) / len(xs_)
            loss.backward()
            total = total + loss.detach()
        opt.step()
        return total

    def args(i):
        k = 2 if i < 9 else 3
        return ([xs(i, (3, 4), seed=j) for j in range(k)],
                [xs(i, (3, 3), seed=10 + j) for j in range(k)])
    return dict(f=f, args=args, snap=model_snap(m, opt))


case("grad_accum_list_of_microbatches")(_v_grad_accum_microbatches)


def _v_clip_norm_arg():
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.1)

    def f(x, y, max_norm):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        n = tt.nn.utils.clip_grad_norm_(m.parameters(), max_norm)
        opt.step()
        return loss, n
    return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1) * 5, 0.1 + 0.05 * i),
                snap=model_snap(m, opt))


case("clip_norm_float_arg_returns_norm")(_v_clip_norm_arg)


def _v_loss_item_outside_history():
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.1)
    hist = []

    def f(x, y):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def outer(cf):
        def step(x, y):
            loss = cf(x, y)
            hist.append(float(loss))
            return loss
        return step
    return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1)), wrap_outer=outer,
                snap=model_snap(m, opt, extra=lambda: list(hist)))


case("loss_float_logged_outside")(_v_loss_item_outside_history)


def _v_temperature_attr_outside_forward():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3, rng=0)
            self.temperature = 1.0

        def forward(self, x):
            return self.lin(x)
    m = M()

    def f(x):
        return tt.softmax(m(x) / m.temperature)

    def change(i):
        m.temperature = 0.5 * i
    return dict(f=f, args=lambda i: (xs(i, (3, 4)),), change=change, snap=model_snap(m))


case("module_temperature_read_outside_forward")(_v_temperature_attr_outside_forward)


def _v_weight_tying_outside():
    emb = nn.Embedding(10, 4, rng=0)
    head = nn.Linear(4, 10, rng=1, bias=False)

    def f(idx):
        return tt.sum(head(emb(idx)))

    def change(i):
        head.weight = emb.weight
    return dict(f=f, args=lambda i: (ints(i, 5, 10),), change=change,
                snap=lambda: [module_state(emb), module_state(head)])


case("weight_tied_outside_on_call_3")(_v_weight_tying_outside)


def _v_mode_dependent_forward():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3, rng=0)

        def forward(self, x):
            y = self.lin(x)
            return y if self.training else tt.softmax(y)
    m = M()

    def f(x):
        return m(x)

    def change(i):
        if i == 2:
            m.eval()
        else:
            m.train()
    return dict(f=f, args=lambda i: (xs(i, (3, 4)),), change=change, snap=model_snap(m))


case("mode_dependent_forward_eval_then_train")(_v_mode_dependent_forward)


def _v_topk_like_argmax_index():
    W = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)

    def f(x):
        k = int(tt.argmax(tt.sum(x, axis=1)))
        return tt.tensor(W)[k] * x[k]
    return dict(f=f, args=lambda i: (xs(i, (5, 3)),))


case("argmax_int_indexes_held_array")(_v_topk_like_argmax_index)


def _v_numpy_scalar_lr_update_param():
    w = tt.tensor(np.ones((4, 2), np.float32), requires_grad=True)

    def f(x, lr):
        loss = tt.sum(tt.matmul(x, w) ** 2)
        loss.backward()
        with tt.no_grad():
            w.sub_(w.grad * lr)
        return loss

    def outer(cf):
        def step(x, lr):
            w.grad = None
            return cf(x, lr)
        return step
    return dict(f=f, args=lambda i: (xs(i, (3, 4)), np.float32(0.01 * (i + 1))), wrap_outer=outer,
                snap=lambda: [w.data, w.grad])


case("np_float32_lr_sub_inplace_after_backward", refuse_ok=True)(_v_numpy_scalar_lr_update_param)


def _v_skip_step_on_big_loss():
    m = mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def f(x, y):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        if loss > 5:
            return loss.detach()
        loss.backward()
        opt.step()
        return loss

    return dict(f=f, args=lambda i: (xs(i, (6, 4)), xs(i, (6, 3), seed=1) * (6 if i in (2, 9)
                                                                               else 1)),
                snap=model_snap(m, opt))


case("ctl_skip_step_on_large_loss")(_v_skip_step_on_big_loss)


def _v_nan_guard_zero_grad():
    m = mlp()
    opt = tt.optim.Adam(m.parameters(), lr=0.01)

    def f(x, y):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        if not bool(tt.isfinite(loss)):
            opt.zero_grad()
        opt.step()
        return loss

    def args(i):
        y = xs(i, (6, 3), seed=1)
        if i in (2, 9):
            y[0, 0] = np.nan
        return (xs(i, (6, 4)), y)
    return dict(f=f, args=args, snap=model_snap(m, opt))


case("ctl_nan_loss_skips_update_after_backward", refuse_ok=True)(_v_nan_guard_zero_grad)


def _v_closed_model_grad_transform():
    m = mlp()

    def f(x):
        def loss(W):
            return tt.sum(tt.tanh(tt.matmul(x, W)) @ tt.transpose(m[2].weight))
        return tt.grad(loss)(m[0].weight.data.T)

    def change(i):
        m[0].weight.data = m[0].weight.data * 1.5
    return dict(f=f, args=lambda i: (xs(i, (3, 4)),), change=change, snap=model_snap(m))


case("grad_transform_over_param_data_rebound")(_v_closed_model_grad_transform)


# ============================================================ the test

_SHOW = __import__("os").environ.get("R23A_SHOW") == "1"

_TRACE = ("the refusal leaves a trace: the attribute f set while recorded stays set after the "
          "RuntimeError ({})")
_STALE_ELEM = ("a large held array changed in place outside: the compiled program keeps the "
               "recording's value of {} (eager reads the new one)")
_AFTER_STEP = ("a learning rate written into param_groups after opt.step() is not refused: the "
               "compiled first call steps with the new lr (eager: the old one), parameters differ")
XFAIL = {
    "state_counter_attr": _TRACE.format("c.n = c.n + 1 on an object: c.n is 2 after the refusal"),
    "state_refusal_trace_obj_counter": _TRACE.format("o.v = o.v + 1: o.v is 2.0 after it"),
    "state_module_forward_counter": _TRACE.format("self.calls += 1 in forward: calls is 2"),
    "state_module_attr_from_float_store_then_use": _TRACE.format("self.t = t in forward"),
    "state_module_attr_from_float_use_then_store": _TRACE.format("self.t = t after its use"),
    "state_module_attr_from_float_store_expr": _TRACE.format("self.t = t * 0.5 + 1"),
    "state_module_attr_from_float_store_unread": _TRACE.format("self.last = t, never read"),
    "state_module_attr_from_same_float_every_call":
        _TRACE.format("self.temp = t with the same t=2.0 every call, itself a false refusal: "
                      "a constant written each call is no refusal"),
    "state_flag_set_on_big_call": ("a flag set inside only on the call whose loss is large "
                                   "(st['seen_big'] = True) is read stale on the next call: "
                                   "compiled returns s*1, eager s*2"),
    "state_module_boost_set_on_big_call": ("self.boost = 2.0 set in forward only when "
                                           "max|y| > 5: call 10 returns y*1 compiled, y*2 eager"),
    "hp_sgd_lr_after_step": _AFTER_STEP,
    "hp_adam_lr_after_step": _AFTER_STEP,
    "hp_adamw_lr_after_step": _AFTER_STEP,
    "hp_rmsprop_lr_after_step": _AFTER_STEP,
    "hp_written_after_step_before_sched": ("lr written after opt.step() and before "
                                           "sched.step(): not refused; group lr 0.05 compiled, "
                                           "0.1 eager"),
    "hp_adam_betas_too": ("g['betas'] = (1 - lr, 0.999) inside: the tracer's _Number is stored "
                          "in param_groups and frozen at the first call's value"),
    "hp_adam_betas_form_arg_tuple": ("g['betas'] = (b1, 0.999) from a float argument: a "
                                     "tinytensor.compile.tracer._Number lands in param_groups, "
                                     "frozen at 0.8"),
    "hp_adam_betas_form_second_expr": ("g['betas'] = (0.9, 1 - lr * 0.01): the tracked number "
                                       "leaks into param_groups, frozen"),
    "hp_sgd_read_lr_before_write": ("opt.param_groups[0]['lr'] read before it is written from "
                                    "the lr argument and returned: compiled returns the "
                                    "recording's 0.1 on every later call (eager: last call's lr)"),
    "hp_read_previous_lr_scaled_loss": ("loss * previous lr (read before the write): the "
                                        "previous lr is frozen at the recording's value"),
    "big_head_slice_add_all_closure": _STALE_ELEM.format("X[:10] * 2"),
    "big_first_elem_add_all_closure": _STALE_ELEM.format("float(X[0, 0])"),
    "big_first_elem_one_elem_first_closure": _STALE_ELEM.format("float(X[0, 0])"),
    "big_first_elem_scale_closure": _STALE_ELEM.format("float(X[0, 0])"),
    "big_xt_v_add_all_closure": _STALE_ELEM.format("X.T @ X[:, 0]"),
    "big_xt_v_one_elem_last_closure": _STALE_ELEM.format("X.T @ X[:, 0]"),
    "big_last_elem_add_all_closure": _STALE_ELEM.format("float(X[-1, -1])"),
    "big_last_elem_one_elem_last_closure": _STALE_ELEM.format("float(X[-1, -1])"),
    "big_last_elem_scale_closure": _STALE_ELEM.format("float(X[-1, -1])"),
    "big_last_elem_last_col_closure": _STALE_ELEM.format("float(X[-1, -1])"),
    "big_last_elem_one_elem_last_module": _STALE_ELEM.format("float(m.P[-1, -1])"),
    "big_last_elem_one_elem_last_list": _STALE_ELEM.format("float(lst[0][-1, -1])"),
    "big_last_elem_one_elem_last_namespace": _STALE_ELEM.format("float(ns.data[-1, -1])"),
    "big_int_index_elem_add_all_closure": _STALE_ELEM.format("X[3, 4]"),
    "big_module_train_step_elem_first_row_changed": _STALE_ELEM.format(
        "float(self.P[0, 0]) in a Module's forward in a whole training step"),
    "big_elem_at_int_arguments": _STALE_ELEM.format("X[r, c] with int arguments r, c"),
    "bn_momentum_changed_outside_to_none": ("false refusal: BatchNorm1d.momentum set to None "
                                            "(cumulative average, documented in training.md) "
                                            "refused in a compiled training step"),
}


# fixed since the round was written (its xfail markers dropped): each now equal to eager or a
# clean refusal
FIXED = {
    'bn_momentum_changed_outside_to_none',
    'hp_sgd_read_lr_before_write',
    'hp_read_previous_lr_scaled_loss',
    'big_elem_at_int_arguments',
    'big_first_elem_add_all_closure',
    'big_first_elem_one_elem_first_closure',
    'big_first_elem_scale_closure',
    'big_head_slice_add_all_closure',
    'big_int_index_elem_add_all_closure',
    'big_last_elem_add_all_closure',
    'big_last_elem_last_col_closure',
    'big_last_elem_one_elem_last_closure',
    'big_last_elem_one_elem_last_list',
    'big_last_elem_one_elem_last_module',
    'big_last_elem_one_elem_last_namespace',
    'big_last_elem_scale_closure',
    'big_module_train_step_elem_first_row_changed',
    'big_xt_v_add_all_closure',
    'big_xt_v_one_elem_last_closure',
    'hp_adam_betas_form_arg_tuple',
    'hp_adam_betas_form_second_expr',
    'hp_adam_betas_too',
    'hp_adam_lr_after_step',
    'hp_adamw_lr_after_step',
    'hp_rmsprop_lr_after_step',
    'hp_sgd_lr_after_step',
    'hp_written_after_step_before_sched',
    'state_counter_attr',
    'state_flag_set_on_big_call',
    'state_module_attr_from_float_store_expr',
    'state_module_attr_from_float_store_then_use',
    'state_module_attr_from_float_store_unread',
    'state_module_attr_from_float_use_then_store',
    'state_module_attr_from_same_float_every_call',
    'state_module_boost_set_on_big_call',
    'state_module_forward_counter',
    'state_refusal_trace_obj_counter',
}


def _params():
    out = []
    for name, (_b, _c, xfail, _r) in CASES.items():
        xfail = None if name in FIXED else XFAIL.get(name, xfail)
        marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("name", _params())
def test_case(name):
    build, calls, _xfail, refuse_ok = CASES[name]
    try:
        run(build, calls)
    except Refused as e:
        if _SHOW:
            print("REFUSED", name, str(e).splitlines()[0][:200])
        assert refuse_ok, f"false refusal of a program eager runs: {str(e).splitlines()[0]}"


def test_enough_cases():
    assert len(CASES) >= 200
