"""Round 19a: a fresh user porting real NumPy/PyTorch code checks ``tt.compile`` against eager.

The harness (``_run``): each case is a *builder* that makes a fresh set-up (same seeds every
time) and returns a dict with

* ``f``: the function (called eagerly in one set-up, through ``tt.compile`` in the other);
* ``args(i)``: the arguments of call ``i`` (fresh objects, made from seeds, so both set-ups get
  equal but distinct arguments);
* ``state()`` (optional): everything outside the call to compare after it (parameters with their
  ``.grad``, buffers, optimizer state, generator state, Python containers the program touches);
* ``change(i)`` (optional): a change made *outside* the compiled function, before the 3rd and
  10th calls (and the 40th for the long cases; some cases change something before every call),
  on both set-ups alike;
* ``wrap(i, fn, args)`` (optional): how call ``i`` is made (under ``tt.no_grad()``, through
  ``tt.grad``/``vmap``/``jvp`` of the function, with keywords, in another thread, ...);
* ``post(result, args)`` (optional): what the caller does with the result right after the call
  (``backward()``, ``opt.step()``, reading strides), itself compared;
* ``warn`` (optional): compare the warnings each call gives too (tt.compile's own notes aside).

After every call the two results are compared bit for bit: the type of every leaf, dtype, shape,
``requires_grad``, the bytes of the values, Python numbers by type and ``repr``, containers by
type and contents, which result leaves are the same object (as each other or as an argument),
then ``post``, ``state()``, the arguments after the call and both generators. An exception eager
mode raises must be raised compiled (same type, same first line of its message); the case goes
on with the next call. A
``RuntimeError`` from the compiled call that eager mode does not raise and that names
``tt.compile`` is a refusal: the contract allows it, the case stops there and passes. Anything
else (a different value, a missing exception, an extra exception) fails the case. The global
generators (tinytensor's and NumPy's) are kept per set-up: each call runs from its own set-up's
saved state, and the states are compared too.

Cases that differ today are strict xfails with a one-line reason.
"""
import collections
import dataclasses
import enum
import functools
import gc
import math
import types
import warnings

import numpy as np
import pytest

import tinytensor as tt

# ----------------------------------------------------------------------------- the harness

class Refused(Exception):
    pass


def _leaves(obj, out):
    if isinstance(obj, dict):
        for k in obj:
            _leaves(obj[k], out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _leaves(v, out)
    else:
        out.append(obj)
    return out


def _same(a, b, where="result"):
    assert type(a) is type(b), f"{where}: type {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, tt.Tensor):
        assert a.dtype == b.dtype, f"{where}: dtype {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{where}: shape {a.shape} != {b.shape}"
        assert a.requires_grad == b.requires_grad, f"{where}: requires_grad differs"
        _same(np.asarray(a.data), np.asarray(b.data), where + ".data")
        if a.is_leaf and b.is_leaf:
            ga, gb = a.grad, b.grad
            assert (ga is None) == (gb is None), f"{where}.grad: {ga} vs {gb}"
            if ga is not None:
                _same(np.asarray(ga), np.asarray(gb), where + ".grad")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype, f"{where}: dtype {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{where}: shape {a.shape} != {b.shape}"
        if a.dtype == object:
            for k, (x, y) in enumerate(zip(a.ravel(), b.ravel())):
                _same(x, y, f"{where}[{k}]")
        else:
            assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), \
                f"{where}: values {a!r} != {b!r}"
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), f"{where}: {a!r} != {b!r}"
    elif isinstance(a, (float, complex)):
        assert repr(a) == repr(b) and np.array(a).tobytes() == np.array(b).tobytes(), \
            f"{where}: {a!r} != {b!r}"
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} != {list(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: len {len(a)} != {len(b)}"
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    elif dataclasses.is_dataclass(a) and not isinstance(a, type):
        _same(dataclasses.asdict(a), dataclasses.asdict(b), where)
    elif isinstance(a, types.SimpleNamespace):
        _same(vars(a), vars(b), where)
    elif isinstance(a, np.random.Generator):
        _same(a.bit_generator.state, b.bit_generator.state, where + ".state")
    elif type(a).__module__ == __name__ and hasattr(a, "__dict__"):
        _same(vars(a), vars(b), where + ".__dict__")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _alias_pattern(args, res):
    arg_leaves = _leaves(args, [])
    res_leaves = _leaves(res, [])
    pat = []
    for k, leaf in enumerate(res_leaves):
        if isinstance(leaf, (int, float, str, bool, type(None), np.generic)):
            pat.append(None)
            continue
        mark = None
        for j, a in enumerate(arg_leaves):
            if a is leaf:
                mark = ("arg", j)
                break
        if mark is None:
            for j in range(k):
                if res_leaves[j] is leaf:
                    mark = ("res", j)
                    break
        pat.append(mark)
    return pat


def _call(env, fn, args, gstate):
    tt.set_rng_state(gstate["tt"])
    np.random.set_state(gstate["np"])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = ("ok", fn(*args))
            except Exception as e:  # noqa: BLE001
                out = ("err", e)
        env["_warned"] = [(w.category.__name__, str(w.message)) for w in caught
                          if not str(w.message).startswith("tt.compile")]
        return out
    finally:
        gstate["tt"] = tt.get_rng_state()
        gstate["np"] = np.random.get_state()


def _wrapped(wrap, i, fn):
    return lambda *args: wrap(i, fn, args)


def _run(build, n=12, changes=(2, 9), compile_kw=None):
    tt.manual_seed(1234)
    np.random.seed(1234)
    g0 = {"tt": tt.get_rng_state(), "np": np.random.get_state()}
    ge = {"tt": g0["tt"].copy(), "np": g0["np"]}
    gc = {"tt": g0["tt"].copy(), "np": g0["np"]}
    tt.set_rng_state(ge["tt"])
    np.random.set_state(ge["np"])
    ea = build()
    ge["tt"], ge["np"] = tt.get_rng_state(), np.random.get_state()
    tt.set_rng_state(gc["tt"])
    np.random.set_state(gc["np"])
    ca = build()
    gc["tt"], gc["np"] = tt.get_rng_state(), np.random.get_state()
    cf = tt.compile(ca["f"], **(compile_kw or {}))
    raised = False
    for i in range(n):
        if i in changes and "change" in ea:
            ea["change"](i)
            ca["change"](i)
        ae, ac = ea["args"](i), ca["args"](i)
        fe, fc = ea["f"], cf
        if "wrap" in ea:
            fe = _wrapped(ea["wrap"], i, fe)
            fc = _wrapped(ca["wrap"], i, fc)
        re = _call(ea, fe, ae, ge)
        rc = _call(ca, fc, ac, gc)
        if re[0] == "err":
            assert rc[0] == "err", f"call {i}: eager raised {re[1]!r}, compiled returned {rc[1]!r}"
            assert type(rc[1]) is type(re[1]), f"call {i}: {re[1]!r} vs {rc[1]!r}"
            first_e, first_c = str(re[1]).split("\n")[0], str(rc[1]).split("\n")[0]
            assert first_c == first_e, f"call {i}: message {first_e!r} vs {first_c!r}"
            raised = True
            continue
        if rc[0] == "err":
            e = rc[1]
            if isinstance(e, RuntimeError) and "tt.compile" in str(e):
                return "refused: " + str(e).splitlines()[0][:150]
            raise AssertionError(f"call {i}: compiled crashed: {e!r}") from e
        _same(re[1], rc[1], f"call {i} result")
        assert _alias_pattern(ae, re[1]) == _alias_pattern(ac, rc[1]), f"call {i}: identity"
        if ea.get("warn"):
            _same(ea["_warned"], ca["_warned"], f"call {i} warnings")
        if "post" in ea:
            _same(ea["post"](re[1], ae), ca["post"](rc[1], ac), f"call {i} post")
        if "state" in ea:
            _same(ea["state"](), ca["state"](), f"call {i} state")
        _same(ae, ac, f"call {i} arguments after")
        _same(ge["tt"], gc["tt"], f"call {i} tt rng")
        _same(ge["np"][1], gc["np"][1], f"call {i} np rng")
    return "equal (some raised)" if raised else "equal"


CASES = {}


def case(n=12, changes=(2, 9), xfail=None, **kw):
    def deco(build):
        CASES[build.__name__] = (build, n, changes, xfail, kw)
        return build
    return deco


def R(i, *shape, dtype=np.float64, seed=0):
    """Deterministic data for call i."""
    return np.random.default_rng(1000 * seed + i).standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------------------- 1. value-dependent
# control flow in numerical code


@case()
def newton_sqrt_while():
    def f(a):
        x = a * 0.5 + 1.0
        k = 0
        while float(tt.max(tt.abs(x * x - a))) > 1e-10 and k < 50:
            x = 0.5 * (x + a / x)
            k += 1
        return x, k
    return {"f": f, "args": lambda i: (np.abs(R(i, 4)) + 0.1 * (1 + i % 3),)}


@case()
def newton_tensor_arg_grad():
    w = tt.tensor(np.array([0.3, 0.7]), requires_grad=True)

    def f(a):
        x = a * w
        for _ in range(3):
            x = x - (x * x * x - a) / (3 * x * x)
        return x.sum()
    return {"f": f, "args": lambda i: (np.abs(R(i, 2)) + 1.0,), "state": lambda: w}


@case()
def backtracking_line_search():
    def f(x, g):
        t = 1.0
        fx = tt.sum(x * x)
        while float(tt.sum((x - t * g) ** 2)) > float(fx) - 0.5 * t * float(tt.sum(g * g)):
            t *= 0.5
            if t < 1e-8:
                break
        return x - t * g, t
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 3, seed=1) * (1 + i))}


@case()
def early_stopping_loop():
    def f(x):
        best = None
        for step in range(20):
            x = x * 0.7 + 0.1
            v = tt.sum(x * x)
            if best is not None and float(best) - float(v) < 1e-3:
                return x, step
            best = v
        return x, -1
    return {"f": f, "args": lambda i: (R(i, 3) * (i % 4 + 1),)}


@case()
def clip_by_hand_item():
    def f(g):
        n = tt.sqrt(tt.sum(g * g))
        if n.item() > 1.0:
            g = g / n
        return g
    return {"f": f, "args": lambda i: (R(i, 5) * (0.1 if i % 3 == 0 else 3.0),)}


@case()
def clip_by_hand_np_where():
    def f(g):
        n = np.sqrt((g.data ** 2).sum())
        scale = np.minimum(1.0, 1.0 / n)
        return g * scale
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 5) * (0.1 if i % 3 == 0 else 3.0)),)}


@case()
def try_except_cholesky():
    def f(a):
        try:
            L = tt.linalg.cholesky(a)
            return L, "chol"
        except np.linalg.LinAlgError:
            return a * 0.0, "fail"
    def args(i):
        m = R(i, 3, 3)
        return (m @ m.T + 0.1 * np.eye(3) if i % 4 != 3 else -np.eye(3),)
    return {"f": f, "args": args}


@case()
def try_except_solve_singular():
    def f(a, b):
        try:
            return tt.linalg.solve(a, b)
        except np.linalg.LinAlgError:
            return tt.linalg.solve(a + 1e-3 * np.eye(2), b)
    def args(i):
        a = R(i, 2, 2)
        if i % 3 == 1:
            a[1] = a[0]
        return a, R(i, 2, seed=2)
    return {"f": f, "args": args}


@case()
def try_finally_counter_local():
    def f(x):
        acc = []
        try:
            acc.append(x * 2)
            if float(x.sum()) > 0:
                raise ValueError("pos")
            acc.append(x + 1)
        except ValueError:
            acc.append(-x)
        finally:
            acc.append(x * 0)
        return acc
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def raise_inside_on_value():
    def f(x):
        if float(tt.min(x)) < -2.0:
            raise FloatingPointError("too small")
        return tt.exp(x)
    return {"f": f, "args": lambda i: (R(i, 4) - (3.0 if i == 5 else 0.0),)}


@case()
def walrus_in_while():
    def f(x):
        k = 0
        while (m := float(tt.max(x))) > 1.0:
            x = x / 2
            k += 1
        return x, k, m
    return {"f": f, "args": lambda i: (np.abs(R(i, 3)) * (i + 1),)}


@case()
def match_statement_on_shape():
    def f(x):
        match x.shape:
            case (n,):
                return x * n
            case (n, m):
                return x.sum(axis=1) * m
            case _:
                return x
    return {"f": f, "args": lambda i: (R(i, 3) if i % 2 else R(i, 2, 3),)}


@case()
def match_statement_on_item():
    def f(x, code):
        match int(code.sum()):
            case 0:
                return x
            case 1 | 2:
                return x * 2
            case _:
                return -x
    return {"f": f, "args": lambda i: (R(i, 3), np.array([i % 4]))}


@case()
def generator_expression_sum():
    def f(xs):
        return sum(tt.tanh(x) for x in xs if float(tt.sum(x)) > 0)
    return {"f": f, "args": lambda i: ([R(i, 3, seed=k) for k in range(4)],)}


@case()
def list_comprehension_filter_tolist():
    def f(x):
        vals = x.tolist()
        return tt.stack([x[j] * 2 for j, v in enumerate(vals) if v > 0] + [x[0]])
    return {"f": f, "args": lambda i: (R(i, 5),)}


@case()
def bisection_root():
    def f(lo, hi):
        for _ in range(30):
            mid = (lo + hi) / 2
            if float(tt.sum(mid * mid * mid - 2.0)) > 0:
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2
    return {"f": f, "args": lambda i: (np.array(0.0), np.array(2.0 + i % 3))}


@case()
def any_all_python_builtins():
    def f(x):
        if any(v > 1 for v in x.tolist()):
            return x - 1
        if all(v < 0 for v in x.tolist()):
            return -x
        return x
    return {"f": f, "args": lambda i: (R(i, 3) * (0.3 + i % 3),)}


@case()
def sorted_python_on_tolist():
    def f(x):
        order = sorted(range(x.shape[0]), key=lambda j: x.tolist()[j])
        return x[np.array(order)]
    return {"f": f, "args": lambda i: (R(i, 5),)}


@case()
def nan_check_isnan_any():
    def f(x):
        y = tt.log(x)
        if bool(tt.any(tt.isnan(y))):
            return tt.zeros_like(y)
        return y
    return {"f": f, "args": lambda i: (R(i, 3) + (5.0 if i % 2 else 0.0),)}


@case()
def max_iter_with_else_clause():
    def f(x):
        for k in range(6):  # noqa: B007
            x = tt.cos(x)
            if float(tt.abs(x - tt.cos(x)).max()) < 1e-2:
                break
        else:
            k = 99
        return x, k
    return {"f": f, "args": lambda i: (R(i, 2) * i,)}


@case()
def conditional_expression_chain():
    def f(x):
        s = float(x.sum())
        return x * 2 if s > 1 else (x * 3 if s > -1 else x * 4)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def bool_of_zero_d_compare_in_and():
    def f(x, y):
        if (x.sum() > 0) and (y.sum() > 0):
            return x + y
        return x - y
    return {"f": f, "args": lambda i: (R(i, 2), R(i, 2, seed=3))}


@case()
def int_of_argmax_as_index():
    def f(x):
        j = int(tt.argmax(x))
        return x[j] * 2 + x[(j + 1) % x.shape[0]]
    return {"f": f, "args": lambda i: (R(i, 5),)}


@case()
def fixed_point_with_tol_on_grad():
    w = tt.tensor(np.array([0.5, -0.2]), requires_grad=True)

    def f(x):
        h = x
        for _ in range(10):
            h_new = tt.tanh(w * h + x)
            if tt.max(tt.abs(h_new - h)).item() < 1e-6:
                break
            h = h_new
        return tt.sum(h_new)
    return {"f": f, "args": lambda i: (R(i, 2),), "state": lambda: w}


# ----------------------------------------------------------------------------- 2. closures and
# configuration objects

@dataclasses.dataclass
class Cfg:
    scale: float = 2.0
    act: str = "tanh"
    eps: float = 1e-5
    ks: list = dataclasses.field(default_factory=lambda: [1, 2])


@dataclasses.dataclass(frozen=True)
class FrozenCfg:
    scale: float = 2.0
    shift: float = 0.5


class Act(enum.Enum):
    TANH = "tanh"
    RELU = "relu"


class Mode(enum.IntEnum):
    A = 1
    B = 2


def _act(x, name):
    return tt.tanh(x) if name == "tanh" else tt.relu(x)


@case()
def dataclass_config_fields():
    cfg = Cfg()

    def f(x):
        return _act(x * cfg.scale, cfg.act) + cfg.eps

    def change(i):
        if i == 2:
            cfg.scale = 3.0
        else:
            cfg.act = "relu"
    return {"f": f, "args": lambda i: (R(i, 4),), "change": change, "state": lambda: cfg}


@case()
def dataclass_list_field_mutated():
    cfg = Cfg()

    def f(x):
        return sum(x * k for k in cfg.ks)

    def change(i):
        cfg.ks.append(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def frozen_dataclass_replaced_global():
    holder = {"cfg": FrozenCfg()}

    def f(x):
        c = holder["cfg"]
        return x * c.scale + c.shift

    def change(i):
        holder["cfg"] = dataclasses.replace(holder["cfg"], shift=float(i))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def simplenamespace_hparams():
    hp = types.SimpleNamespace(lr=0.1, wd=0.01, nesterov=False)

    def f(w, g):
        g = g + hp.wd * w
        if hp.nesterov:
            g = g * 2
        return w - hp.lr * g

    def change(i):
        hp.lr = hp.lr / 2 if i == 2 else hp.lr
        hp.nesterov = i == 9
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 3, seed=1)), "change": change}


@case()
def enum_switch():
    mode = {"act": Act.TANH}

    def f(x):
        if mode["act"] is Act.TANH:
            return tt.tanh(x)
        return tt.relu(x)

    def change(i):
        mode["act"] = Act.RELU if i == 2 else Act.TANH
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def intenum_as_multiplier():
    st = types.SimpleNamespace(mode=Mode.A)

    def f(x):
        return x * st.mode

    def change(i):
        st.mode = Mode.B
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32),), "change": change}


@case()
def dict_of_hparams_nested():
    hp = {"opt": {"lr": 0.1, "betas": (0.9, 0.99)}, "clip": 1.0}

    def f(m, g):
        b1, _ = hp["opt"]["betas"]
        m = b1 * m + (1 - b1) * g
        return tt.clip(m, -hp["clip"], hp["clip"]) * hp["opt"]["lr"]

    def change(i):
        if i == 2:
            hp["opt"]["betas"] = (0.5, 0.99)
        else:
            hp["clip"] = 0.1
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 3, seed=1)), "change": change}


@case()
def functools_partial_kwarg_changed():
    def body(x, *, alpha):
        return tt.leaky_relu(x, alpha) if hasattr(tt, "leaky_relu") else x * alpha
    holder = types.SimpleNamespace(fn=functools.partial(body, alpha=0.1))

    def f(x):
        return holder.fn(x)

    def change(i):
        holder.fn = functools.partial(body, alpha=0.01 * i)
    return {"f": f, "args": lambda i: (R(i, 4),), "change": change}


@case()
def partial_keywords_dict_mutated():
    def body(x, scale=1.0):
        return x * scale
    p = functools.partial(body, scale=2.0)

    def f(x):
        return p(x)

    def change(i):
        p.keywords["scale"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 4),), "change": change}


@case()
def property_reads_instance_attr():
    class Layer:
        def __init__(self):
            self._t = 1.0

        @property
        def temperature(self):
            return self._t * 2

    layer = Layer()

    def f(x):
        return tt.softmax(x / layer.temperature, axis=-1)

    def change(i):
        layer._t = 0.25 * i
    return {"f": f, "args": lambda i: (R(i, 2, 3),), "change": change}


@case()
def property_reads_global_list():
    scales = [1.0]

    class Layer:
        @property
        def s(self):
            return scales[-1]

    layer = Layer()

    def f(x):
        return x * layer.s

    def change(i):
        scales.append(float(i))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def class_attribute_changed():
    class Net:
        gain = 1.0

        def __call__(self, x):
            return x * self.gain

    net = Net()

    def change(i):
        Net.gain = float(i)
    return {"f": lambda x: net(x), "args": lambda i: (R(i, 3),), "change": change}


@case()
def class_attribute_shadowed_on_instance():
    class Net:
        gain = 1.0

        def __call__(self, x):
            return x * self.gain

    net = Net()

    def change(i):
        if i == 2:
            net.gain = 5.0
        else:
            del net.gain
    return {"f": lambda x: net(x), "args": lambda i: (R(i, 3),), "change": change}


@case()
def method_replaced_on_instance():
    class Net:
        def act(self, x):
            return tt.tanh(x)

        def __call__(self, x):
            return self.act(x) * 2

    net = Net()

    def change(i):
        net.act = (lambda x: tt.relu(x)) if i == 2 else (lambda x: x * 0.5)
    return {"f": lambda x: net(x), "args": lambda i: (R(i, 3),), "change": change}


@case()
def getattr_dunder_config():
    class Cfg2:
        def __init__(self):
            self.__dict__["_d"] = {"k": 2.0}

        def __getattr__(self, name):
            return self._d[name]

    c = Cfg2()

    def f(x):
        return x * c.k

    def change(i):
        c._d["k"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def descriptor_on_class():
    class Scaled:
        def __get__(self, obj, typ=None):
            return obj.base * 3

    class M:
        s = Scaled()

        def __init__(self):
            self.base = 1.0

    m = M()

    def f(x):
        return x * m.s

    def change(i):
        m.base = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def descriptor_reads_global_dict():
    table = {"v": 1.0}

    class Scaled:
        def __get__(self, obj, typ=None):
            return table["v"]

    class M:
        s = Scaled()

    m = M()

    def f(x):
        return x * m.s

    def change(i):
        table["v"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def slots_object_attr():
    class P:
        __slots__ = ("a", "b")

        def __init__(self):
            self.a, self.b = 1.0, 2.0

    p = P()

    def f(x):
        return x * p.a + p.b

    def change(i):
        p.b = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def nested_helper_closure_cell():
    def make():
        k = [1.0]

        def helper(x):
            return x * k[0]

        def bump(v):
            k[0] = v
        return helper, bump

    helper, bump = make()

    def f(x):
        return helper(x) + 1

    return {"f": f, "args": lambda i: (R(i, 3),), "change": lambda i: bump(float(i))}


@case()
def nonlocal_rebound_outside():
    def make():
        scale = 1.0

        def helper(x):
            return x * scale

        def set_(v):
            nonlocal scale
            scale = v
        return helper, set_

    helper, set_ = make()
    return {"f": lambda x: helper(x), "args": lambda i: (R(i, 3),),
            "change": lambda i: set_(float(i))}


@case()
def decorator_with_wraps_and_state():
    calls = {"scale": 1.0}

    def scaled(fn):
        @functools.wraps(fn)
        def inner(x):
            return fn(x) * calls["scale"]
        return inner

    @scaled
    def g(x):
        return tt.sin(x)

    def change(i):
        calls["scale"] = float(i)
    return {"f": g, "args": lambda i: (R(i, 3),), "change": change}


@case()
def lru_cache_on_shape_helper():
    @functools.cache
    def mask(n):
        return np.tril(np.ones((n, n)))

    def f(x):
        return x * mask(x.shape[0])
    return {"f": f, "args": lambda i: (R(i, 3 + (i >= 5), 3 + (i >= 5)),)}


@case()
def lambda_default_arg_captured():
    fns = [lambda x, k=k: x * k for k in range(3)]
    sel = {"j": 0}

    def f(x):
        return fns[sel["j"]](x)

    def change(i):
        sel["j"] = i % 3
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def function_defaults_mutated():
    def g(x, w=[1.0, 2.0]):  # noqa: B006
        return x * w[0] + w[1]

    def f(x):
        return g(x)

    def change(i):
        g.__defaults__[0][1] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def function_defaults_replaced():
    def g(x, a=1.0):
        return x * a

    def f(x):
        return g(x)

    def change(i):
        g.__defaults__ = (float(i),)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def kwdefaults_replaced():
    def g(x, *, a=1.0):
        return x * a

    def f(x):
        return g(x)

    def change(i):
        g.__kwdefaults__ = {"a": float(i)}
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def code_object_swapped():
    def g(x):
        return x * 2

    def h(x):
        return x * 3

    def f(x):
        return g(x)

    def change(i):
        g.__code__ = h.__code__
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def class_defined_inside_f():
    def f(x):
        class Tmp:
            k = 3.0

            def run(self, v):
                return v * self.k
        return Tmp().run(x)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def namedtuple_config_replaced():
    C = collections.namedtuple("C", "a b")
    hold = {"c": C(1.0, 2.0)}

    def f(x):
        return x * hold["c"].a - hold["c"].b

    def change(i):
        hold["c"] = hold["c"]._replace(b=float(i))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def chainmap_config():
    base = {"s": 1.0}
    over = {}
    cm = collections.ChainMap(over, base)

    def f(x):
        return x * cm["s"]

    def change(i):
        over["s"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def defaultdict_config():
    d = collections.defaultdict(lambda: 1.0)

    def f(x):
        return x * d["s"]

    def change(i):
        d["s"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def ordered_dict_move_to_end():
    d = collections.OrderedDict(a=1.0, b=2.0)

    def f(x):
        return [x * v for v in d.values()]

    def change(i):
        d.move_to_end("a")
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def deque_config():
    d = collections.deque([1.0, 2.0], maxlen=2)

    def f(x):
        return x * d[0] + d[-1]

    def change(i):
        d.append(float(i))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def set_membership_config():
    enabled = {"tanh"}

    def f(x):
        y = x
        if "tanh" in enabled:
            y = tt.tanh(y)
        if "relu" in enabled:
            y = tt.relu(y)
        return y

    def change(i):
        enabled.add("relu") if i == 2 else enabled.discard("tanh")
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def frozenset_global_rebound():
    box = types.SimpleNamespace(s=frozenset({1}))

    def f(x):
        return x * len(box.s)

    def change(i):
        box.s = box.s | {i}
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def array_module_attr_via_module_type():
    mod = types.ModuleType("cfgmod")
    mod.k = 2.0

    def f(x):
        return x * mod.k

    def change(i):
        mod.k = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def bytes_key_and_str_ops():
    cfg = {"name": "ab"}

    def f(x):
        return x * len(cfg["name"].upper()) if cfg["name"].startswith("a") else -x

    def change(i):
        cfg["name"] = "abc" if i == 2 else "b"
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def closure_over_numpy_scalar_changed():
    box = {"s": np.float32(2.0)}

    def f(x):
        return x * box["s"]

    def change(i):
        box["s"] = np.float64(2.0) if i == 2 else np.float32(3.0)
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32),), "change": change}


@case()
def closure_small_array_inplace():
    w = np.ones(3)

    def f(x):
        return x * w

    def change(i):
        w[1] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def closure_small_array_view_of_big():
    big = np.ones(5000)
    v = big[:3]

    def f(x):
        return x * v

    def change(i):
        big[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def closure_large_array_tt_op():
    big = np.ones(5000)

    def f(x):
        return x * tt.sum(big)

    def change(i):
        big[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def mappingproxy_config():
    base = {"s": 1.0}
    mp = types.MappingProxyType(base)

    def f(x):
        return x * mp["s"]

    def change(i):
        base["s"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def userdict_config():
    d = collections.UserDict(s=1.0)

    def f(x):
        return x * d["s"]

    def change(i):
        d["s"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def userlist_config():
    d = collections.UserList([1.0])

    def f(x):
        return x * d[0]

    def change(i):
        d[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def counter_config():
    c = collections.Counter(a=1)

    def f(x):
        return x * c["a"]

    def change(i):
        c["a"] += 1
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def custom_getitem_mapping():
    class Table:
        def __init__(self):
            self._store = {"s": 1.0}

        def __getitem__(self, k):
            return self._store[k]

    t = Table()

    def f(x):
        return x * t["s"]

    def change(i):
        t._store["s"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def stdlib_array_config():
    import array
    a = array.array("d", [1.0, 2.0])

    def f(x):
        return x * a[1]

    def change(i):
        a[1] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def bytearray_config():
    b = bytearray(b"\x01\x02")

    def f(x):
        return x * b[0]

    def change(i):
        b[0] = i
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def weakvaluedict_config():
    import weakref

    class Box:
        def __init__(self, v):
            self.v = v

    keep = [Box(1.0)]
    d = weakref.WeakValueDictionary({"s": keep[0]})

    def f(x):
        return x * d["s"].v

    def change(i):
        keep.append(Box(float(i)))
        d["s"] = keep[-1]
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def chainmap_second_map_changed():
    base = {"s": 1.0}
    cm = collections.ChainMap({}, base)

    def f(x):
        return x * cm["s"]

    def change(i):
        base["s"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def dict_get_with_default():
    d = {}

    def f(x):
        return x * d.get("s", 1.0)

    def change(i):
        d["s"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def dict_keys_iteration_order():
    d = {"a": 1.0, "b": 2.0}

    def f(x):
        out = x
        for k in d:
            out = out * d[k] + (1.0 if k == "a" else -1.0)
        return out

    def change(i):
        v = d.pop("a")
        d["a"] = v
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def dict_in_operator():
    d = {"a": 1.0}

    def f(x):
        return x * 2 if "b" in d else x * 3

    def change(i):
        d["b"] = 0.0
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def list_len_loop_changed():
    layers = [1.0, 2.0]

    def f(x):
        for w in layers:
            x = tt.tanh(x * w)
        return x

    def change(i):
        layers.append(0.5)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def tuple_of_lists_config():
    cfg = ([1.0], [2.0])

    def f(x):
        return x * cfg[0][0] + cfg[1][0]

    def change(i):
        cfg[1][0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def object_in_list_attr():
    class Obj:
        def __init__(self):
            self.v = 1.0

    objs = [Obj(), Obj()]

    def f(x):
        return x * objs[1].v

    def change(i):
        objs[1].v = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def object_in_dict_value_attr_via_values():
    class Obj:
        def __init__(self):
            self.v = 1.0

    objs = {"a": Obj()}

    def f(x):
        return sum(x * o.v for o in objs.values())

    def change(i):
        objs["a"].v = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def vars_of_object():
    o = types.SimpleNamespace(a=1.0)

    def f(x):
        return x * vars(o)["a"]

    def change(i):
        o.a = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def getattr_string_computed():
    o = types.SimpleNamespace(a=1.0, b=2.0)
    which = ["a"]

    def f(x):
        return x * getattr(o, which[0])

    def change(i):
        which[0] = "b" if i == 2 else "a"
        o.a = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def dunder_dict_direct():
    o = types.SimpleNamespace(a=1.0)

    def f(x):
        return x * o.__dict__["a"]

    def change(i):
        o.a = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def operator_attrgetter():
    import operator
    o = types.SimpleNamespace(a=types.SimpleNamespace(b=1.0))
    get = operator.attrgetter("a.b")

    def f(x):
        return x * get(o)

    def change(i):
        o.a.b = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def operator_itemgetter():
    import operator
    d = {"s": 1.0}
    get = operator.itemgetter("s")

    def f(x):
        return x * get(d)

    def change(i):
        d["s"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def map_builtin_over_config():
    ws = [1.0, 2.0]

    def f(x):
        return list(map(lambda w: x * w, ws))

    def change(i):
        ws[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def reduce_over_config():
    ws = [1.0, 2.0]

    def f(x):
        return functools.reduce(lambda a, w: a * w, ws, x)

    def change(i):
        ws[1] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def min_max_builtins_on_config():
    ws = [1.0, 2.0]

    def f(x):
        return x * max(ws) - min(ws)

    def change(i):
        ws.append(float(i))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def zip_enumerate_over_config():
    ws = [1.0, 2.0]
    bs = [0.0, 1.0]

    def f(x):
        for k, (w, b) in enumerate(zip(ws, bs)):
            x = x * w + b * k
        return x

    def change(i):
        bs[1] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def math_fsum_over_config():
    ws = [0.1, 0.2]

    def f(x):
        return x * math.fsum(ws)

    def change(i):
        ws[0] = 0.1 * i
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def sorted_over_config_dict_items():
    d = {"b": 2.0, "a": 1.0}

    def f(x):
        return [x * v for _, v in sorted(d.items())]

    def change(i):
        d["a"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def str_format_config():
    cfg = {"fmt": "{:.1f}"}

    def f(x):
        return x * float(cfg["fmt"].format(2.25))

    def change(i):
        cfg["fmt"] = "{:.2f}"
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


# ----------------------------------------------------------------------------- 3. NumPy interop


@case()
def np_functions_on_traced_tensor():
    w = tt.tensor(R(0, 3), requires_grad=True)

    def f(x):
        return np.exp(x * w).sum() + np.tanh(x).mean()
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: w}


@case()
def np_asarray_of_argument_no_grad():
    def f(x):
        a = np.asarray(x)
        return a * 2 + np.float32(1)
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32),)}


@case()
def numpy_method_then_tensor_again():
    def f(x):
        a = x.numpy()
        b = np.cumsum(a[::-1])
        return tt.tensor(b) * x
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 4)),)}


@case()
def data_astype_int_roundtrip():
    def f(x):
        k = x.data.astype(np.int64)
        return x * k
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 4) * 3),)}


@case()
def np_where_on_data_mask():
    def f(x):
        m = np.where(x.data > 0, 1.0, 0.5)
        return x * m
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 4)),)}


@case()
def bool_array_arithmetic():
    def f(x):
        pos = x > 0
        return pos.astype(np.float64) * x + (~pos) * 0.1
    return {"f": f, "args": lambda i: (R(i, 5),)}


@case()
def bool_tensor_sum_int():
    def f(x):
        n = tt.sum(x > 0)
        return n, x * n
    return {"f": f, "args": lambda i: (R(i, 5),)}


@case()
def int_array_floor_divide_remainder():
    def f(a):
        return a // 3, a % 3, -a // 2
    return {"f": f, "args": lambda i: (np.arange(-5, 5) * (i + 1),)}


@case()
def int_overflow_wraps():
    def f(a):
        return a * a * a
    return {"f": f, "args": lambda i: (np.array([2 ** 20 + i, 7], dtype=np.int32),)}


@case()
def uint8_arithmetic_wraps():
    def f(a):
        return a + np.uint8(250), a - 3
    return {"f": f, "args": lambda i: (np.array([1, 10, 200], dtype=np.uint8) + i,)}


@case()
def int_true_divide():
    def f(a, b):
        return a / b, tt.div(a, b)
    return {"f": f, "args": lambda i: (np.arange(1, 5) + i, np.array([2, 3, 4, 5]))}


@case()
def complex_arithmetic():
    def f(z):
        return z * z.conj(), tt.abs(z), np.angle(z)
    return {"f": f, "args": lambda i: (R(i, 3) + 1j * R(i, 3, seed=1),)}


@case()
def complex_tensor_ops():
    def f(z):
        return tt.exp(z) * tt.real(z) + tt.imag(z)
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 3) + 1j * R(i, 3, seed=1)),)}


@case()
def complex_fft_roundtrip():
    def f(x):
        X = np.fft.rfft(x)
        return np.fft.irfft(X * np.conj(X), n=x.shape[0])
    return {"f": f, "args": lambda i: (R(i, 8),)}


@case()
def float16_reductions():
    def f(x):
        return x.sum(), x.mean(), tt.sum(x), x * 3
    return {"f": f, "args": lambda i: (R(i, 7, dtype=np.float16),)}


@case()
def float32_mixed_with_float64_array():
    c = np.linspace(0, 1, 4)

    def f(x):
        return x * c, x * np.float32(2), x + 1
    return {"f": f, "args": lambda i: (R(i, 4, dtype=np.float32),)}


@case()
def float32_tensor_times_np_float64_scalar():
    def f(x):
        return x * np.float64(0.1), tt.mul(x, np.float64(0.1)), x * 0.1
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 4, dtype=np.float32)),)}


@case()
def zero_d_array_argument():
    def f(x, s):
        return x * s, s * 2
    return {"f": f, "args": lambda i: (R(i, 3), np.array(0.5 * i))}


@case()
def zero_d_array_argument_changes_dtype():
    def f(x, s):
        return x * s
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32),
                                       np.array(0.5, dtype=np.float64 if i >= 3 else np.float32))}


@case()
def empty_array_argument():
    def f(x):
        return x.sum(), tt.mean(x * 2) if x.size else x, x * 2
    return {"f": f, "args": lambda i: (np.zeros((0, 3)) if i % 2 else R(i, 2, 3),)}


@case(xfail="the error for an empty max says 'inputs: tensor (0,)' where eager says 'array (0,)'")
def empty_tensor_reduction_max_raises():
    def f(x):
        return tt.max(x)
    return {"f": f, "args": lambda i: (np.zeros((0,)) if i == 4 else R(i, 3),)}


@case()
def zero_d_tensor_item_and_index():
    def f(x):
        s = tt.sum(x)
        return s, s.item(), s.reshape(1), s[()]
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 3)),)}


@case()
def broadcasting_outer_add():
    def f(a, b):
        return a[:, None] + b[None, :], (a[:, None] * b).sum(axis=0)
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 4, seed=1))}


@case()
def broadcasting_shape_change_rank():
    def f(a, b):
        return a + b
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 2, 3) if i >= 3 else R(i, 3))}


@case()
def views_transpose_reshape_results():
    def f(x):
        return x.T, x.reshape(-1), x[::2], x[1]
    return {"f": f, "args": lambda i: (R(i, 4, 3),)}


@case()
def result_c_contiguity():
    def f(x):
        return (x * 2).T, np.asfortranarray(x) + 1
    return {"f": lambda x: [(r.flags.c_contiguous, r.flags.f_contiguous, r.strides)
                            for r in f(x)], "args": lambda i: (R(i, 4, 3),)}


@case()
def returned_array_is_writeable_and_fresh():
    def f(x):
        return x + 1
    def g(x):
        r = f(x)
        r[0] = 100.0
        return r
    return {"f": g, "args": lambda i: (R(i, 3),)}


@case()
def numpy_inplace_on_fresh_local():
    def f(x):
        y = np.zeros(3)
        y += x
        y *= 2
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def numpy_out_param_on_local():
    def f(x):
        buf = np.empty_like(x)
        np.multiply(x, 3, out=buf)
        return buf
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def np_stack_list_of_args():
    def f(xs):
        return np.stack(xs), np.concatenate(xs), sum(xs)
    return {"f": f, "args": lambda i: ([R(i, 2, seed=k) for k in range(3)],)}


@case()
def np_einsum_and_matmul_operator():
    def f(a, b):
        return np.einsum("ij,jk->ik", a, b), a @ b, tt.matmul(a, b)
    return {"f": f, "args": lambda i: (R(i, 2, 3), R(i, 3, 2, seed=1))}


@case()
def np_linalg_on_args():
    def f(a):
        return np.linalg.inv(a), np.linalg.det(a), np.linalg.norm(a, axis=1)
    return {"f": f, "args": lambda i: (R(i, 3, 3) + 3 * np.eye(3),)}


@case()
def np_sort_argsort_take():
    def f(x):
        idx = np.argsort(x)
        return np.take(x, idx), tt.sort(x), idx
    return {"f": f, "args": lambda i: (R(i, 5),)}


@case()
def np_clip_minimum_with_number_args():
    def f(x, lo, hi):
        return np.clip(x, lo, hi), np.minimum(x, hi)
    return {"f": f, "args": lambda i: (R(i, 5), -0.1 * i, 0.1 * (i + 1))}


@case()
def np_round_and_python_round():
    def f(x):
        return np.round(x, 2), round(float(x[0]), 1), tt.round(x)
    return {"f": f, "args": lambda i: (R(i, 3) * 10,)}


@case()
def nan_inf_propagation():
    def f(x):
        return tt.log(x), tt.sqrt(x), np.maximum(x, np.nan), tt.maximum(x, 0.0)
    return {"f": f, "args": lambda i: (np.array([1.0, -1.0, 0.0, np.inf, np.nan]) * (i + 1),)}


@case()
def signed_zero_results():
    def f(x):
        return x * 0.0, -x * 0.0, tt.abs(x) * -0.0, 0.0 - x
    return {"f": f, "args": lambda i: (np.array([0.0, -0.0, 1.0]) * (1 if i % 2 else -1),)}


@case()
def integer_tensor_index_array():
    def f(x, idx):
        return x[idx], tt.take(x, idx)
    return {"f": f, "args": lambda i: (R(i, 5), np.array([i % 5, (i + 2) % 5]))}


@case()
def integer_index_out_of_range_raises():
    def f(x, idx):
        return x[idx]
    return {"f": f, "args": lambda i: (R(i, 5), np.array([7 if i == 4 else 1]))}


@case()
def bool_arg_mask_arg():
    def f(x, m):
        return tt.where(m, x, 0.0), x * m
    return {"f": f, "args": lambda i: (R(i, 4), R(i, 4, seed=2) > 0)}


@case()
def object_dtype_refuse_or_equal():
    def f(x):
        return x * 2
    return {"f": f, "args": lambda i: (np.array([1, 2.5, 3], dtype=object),)}


@case()
def structured_ints_as_shape():
    def f(x, n):
        return tt.reshape(x, (n, -1))
    return {"f": f, "args": lambda i: (R(i, 12), 3 if i < 5 else 4)}


@case()
def np_integer_scalar_as_repeat():
    def f(x, n):
        return tt.tile(x, n)
    return {"f": f, "args": lambda i: (R(i, 2), np.int64(1 + i % 3))}


@case()
def numpy_inplace_local_then_tt():
    def f(x):
        y = np.ones(3)
        y -= x.data
        return tt.tensor(y) * x
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 3)),)}


@case()
def numpy_item_assign_local_from_arg_value():
    def f(x):
        y = np.zeros(3)
        y[0] = 1.0
        return y * x
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def numpy_inplace_on_result_of_arg():
    def f(x):
        y = x * 2
        y += 1
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def numpy_inplace_local_array_plus_arg_data():
    def f(x):
        acc = np.zeros_like(x.data)
        for k in range(3):
            acc += x.data * k
        return acc
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 3)),)}


@case()
def numpy_ufunc_at_local():
    def f(x):
        y = np.zeros(3)
        np.add.at(y, [0, 0, 1], x)
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def numpy_copyto_local():
    def f(x):
        y = np.empty(3)
        np.copyto(y, x)
        return y + 1
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def numpy_slice_assign_local_from_arg():
    def f(x):
        y = np.zeros(4)
        y[1:] = x
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def numpy_cumsum_out_local():
    def f(x):
        y = np.empty(3)
        np.cumsum(x, out=y)
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def complex_abs_squared_via_conj_tensor():
    def f(z):
        return (z * tt.conj(z)).real if hasattr(z, "real") else z
    return {"f": f, "args": lambda i: (R(i, 3) + 1j * R(i, 3, seed=1),)}


@case()
def complex_conj_times_self():
    def f(z):
        return np.conj(z) * z, z.conj()
    return {"f": f, "args": lambda i: (R(i, 3) + 1j * R(i, 3, seed=1),)}


# ----------------------------------------------------------------------------- 4. numbers as
# arguments


@case()
def number_python_float_then_int():
    def f(x, a):
        return x * a, a * 2
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32), 2 if i % 2 else 2.5)}


@case()
def number_np_float32_vs_float():
    def f(x, a):
        return x * a, tt.mul(x, a), a + x
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32),
                                       np.float32(0.1 * i) if i % 3 else 0.1 * i)}


@case()
def number_bool_argument():
    def f(x, flag):
        return x * flag, (x if flag else -x)
    return {"f": f, "args": lambda i: (R(i, 3), bool(i % 2))}


@case()
def number_np_bool_argument():
    def f(x, flag):
        return x * 2 if flag else x
    return {"f": f, "args": lambda i: (R(i, 3), np.bool_(i % 2))}


@case()
def number_complex_argument():
    def f(x, c):
        return x * c
    return {"f": f, "args": lambda i: (R(i, 3), complex(1, i))}


@case()
def number_huge_int_argument():
    def f(x, n):
        return x * n, n * 3
    return {"f": f, "args": lambda i: (R(i, 3), 2 ** 62 + i)}


@case()
def number_int_overflow_into_int64():
    def f(x, n):
        return x * n
    return {"f": f, "args": lambda i: (np.arange(3, dtype=np.int64), 2 ** 40 * (i + 1))}


@case()
def number_used_in_python_arith_then_op():
    def f(x, lr):
        b = 1 - lr
        return x * b ** 2, lr / 3
    return {"f": f, "args": lambda i: (R(i, 3), 0.1 * (i + 1))}


@case()
def number_floor_division_and_mod():
    def f(x, n):
        return x * (n // 3) + (n % 3)
    return {"f": f, "args": lambda i: (R(i, 3), i + 0.5)}


@case()
def number_negative_zero_and_nan():
    vals = [0.0, -0.0, float("nan"), float("inf"), -0.0, 1.0]

    def f(x, a):
        return x * a, tt.maximum(x, a), a * 0
    return {"f": f, "args": lambda i: (R(i, 3), vals[i % len(vals)])}


@case()
def number_divmod_builtin():
    def f(x, a):
        q, r = divmod(a, 1.0)
        return x * q + r
    return {"f": f, "args": lambda i: (R(i, 3), 0.7 * i)}


@case()
def number_abs_and_neg_builtins():
    def f(x, a):
        return x * abs(a) - (-a)
    return {"f": f, "args": lambda i: (R(i, 3), 0.5 - 0.2 * i)}


@case()
def number_pow_negative_base():
    def f(x, a):
        return x * (a ** 2), x ** a
    return {"f": f, "args": lambda i: (np.abs(R(i, 3)) + 0.1, -1.5 + 0.5 * i)}


@case()
def number_in_list_argument():
    def f(x, cfg):
        return x * cfg[0] + cfg[1]
    return {"f": f, "args": lambda i: (R(i, 3), [0.1 * i, float(i)])}


@case()
def number_in_dict_argument_keyed():
    def f(x, cfg):
        return x * cfg["a"] if cfg["mode"] == "mul" else x + cfg["a"]
    return {"f": f, "args": lambda i: (R(i, 3), {"a": 0.1 * i, "mode": "mul" if i < 5 else "add"})}


@case()
def number_keyword_argument():
    def f(x, *, scale=1.0):
        return x * scale
    cf = {"f": f}
    return {"f": lambda x, s: cf["f"](x, scale=s), "args": lambda i: (R(i, 3), 0.5 * i)}


@case()
def number_used_as_numpy_scalar_ctor():
    def f(x, a):
        return x * np.float32(a)
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32), 0.1 * (i + 1))}


@case()
def number_math_functions():
    def f(x, a):
        return x * math.exp(-a) + math.sqrt(abs(a))
    return {"f": f, "args": lambda i: (R(i, 3), 0.3 * i)}


@case()
def number_np_exp_ufunc():
    def f(x, a):
        return x * np.exp(-a), np.exp(a)
    return {"f": f, "args": lambda i: (R(i, 3), 0.3 * i)}


@case()
def number_compared_in_min():
    def f(x, a):
        return x * min(a, 1.0)
    return {"f": f, "args": lambda i: (R(i, 3), 0.3 * i)}


@case()
def number_int_as_range_and_index():
    def f(x, k):
        return sum(x[j] for j in range(k)) * k
    return {"f": f, "args": lambda i: (R(i, 6), 1 + i % 5)}


@case()
def number_isinstance_dispatch():
    def f(x, a):
        if isinstance(a, int):
            return x + a
        return x * a
    return {"f": f, "args": lambda i: (R(i, 3), i if i % 2 else i + 0.5)}


@case()
def number_float_is_integer_method():
    def f(x, a):
        return x * 2 if a.is_integer() else x * a
    return {"f": f, "args": lambda i: (R(i, 3), float(i) if i % 2 else i + 0.25)}


@case()
def number_hash_used_as_seed_like():
    def f(x, a):
        return x * (hash(a) % 7)
    return {"f": f, "args": lambda i: (R(i, 3), float(i % 4))}


@case()
def number_as_dtype_of_tensor():
    def f(x, a):
        return tt.full(x.shape, a) + x
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32), 0.1 * i)}


@case()
def number_tensor_ctor_dtype():
    def f(x, a):
        return tt.tensor(a) * x, tt.tensor([a, a])
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32), 0.1 * i)}


@case()
def number_np_array_of_number():
    def f(x, a):
        return np.array([a, 2 * a]) * x[:2]
    return {"f": f, "args": lambda i: (R(i, 3), 0.1 * i)}


@case()
def number_int_numpy_scalar_mul_int8_array():
    def f(x, a):
        return x * a
    return {"f": f, "args": lambda i: (np.array([1, 2, 3], dtype=np.int8), np.int64(100 * i))}


@case()
def number_python_int_mul_int8_array_overflow():
    def f(x, a):
        return x * a
    return {"f": f, "args": lambda i: (np.array([1, 2, 3], dtype=np.int8), 60 + i)}


@case()
def number_returned_as_is():
    def f(x, a):
        return x * a, a
    return {"f": f, "args": lambda i: (R(i, 3), 0.25 * i)}


@case()
def number_fstring_used():
    def f(x, a):
        return x * len(f"{a:.3f}")
    return {"f": f, "args": lambda i: (R(i, 3), 10.0 ** i)}


# ----------------------------------------------------------------------------- 5. returned
# structures

Pair = collections.namedtuple("Pair", "a b")


class ArgDict(dict):
    pass


class ArgTuple(tuple):
    pass


class ArgList(list):
    scale = 1.0


@dataclasses.dataclass
class ArgBatch:
    x: np.ndarray
    s: float


class ArgObj:
    def __init__(self, x, s):
        self.x, self.s = x, s


@case()
def return_namedtuple():
    def f(x):
        return Pair(x * 2, tt.sum(x))
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_same_tensor_twice_in_dict():
    def f(x):
        y = tt.tensor(x) * 2
        return {"a": y, "b": y, "c": [y, (y,)]}
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_argument_and_derived():
    def f(x, y):
        return x, y, x + y, [x]
    return {"f": f, "args": lambda i: (R(i, 3), tt.tensor(R(i, 3, seed=1)))}


@case()
def return_argument_dict_itself():
    def f(d):
        return d, d["a"] * 2
    return {"f": f, "args": lambda i: ({"a": R(i, 3), "b": 1.0},)}


@case()
def return_new_dict_with_argument_values():
    def f(d):
        return {**d, "c": d["a"] + 1}
    return {"f": f, "args": lambda i: ({"a": R(i, 3), "b": R(i, 2)},)}


@case()
def return_nested_empty_containers():
    def f(x):
        return {"x": x * 2, "e": [], "t": (), "d": {}, "n": None, "s": "ok"}
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_python_numbers_from_tensors():
    def f(x):
        return float(x.sum()), int(x.argmax()), x.tolist(), bool((x > 0).any())
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_numpy_scalar_types():
    def f(x):
        return x.sum(), x[0], x.max(), np.float32(x.sum()), x.argmax()
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32),)}


@case()
def return_dict_keys_from_values():
    def f(x):
        return {("pos" if float(x.sum()) > 0 else "neg"): x * 2}
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_dict_int_keys_order():
    def f(x):
        return {2: x, 1: x * 2, 0: x * 3}
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_tuple_subclass_non_namedtuple():
    class T(tuple):
        pass

    def f(x):
        return T((x, x * 2))
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_list_subclass():
    class L(list):
        pass

    def f(x):
        return L([x, x * 2])
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_dict_subclass():
    class D(dict):
        pass

    def f(x):
        return D(a=x * 2)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_ordereddict():
    def f(x):
        return collections.OrderedDict(b=x, a=x * 2)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_closed_over_tensor_and_view():
    w = tt.tensor(R(0, 4))

    def f(x):
        return w, w * x, w[1:]
    return {"f": f, "args": lambda i: (R(i, 4),), "state": lambda: w}


@case()
def return_closed_over_array():
    c = np.arange(3.0)

    def f(x):
        return c, x * c
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_argument_view():
    def f(x):
        return x[1:], x.T, x.reshape(-1)

    def post(res, args):
        return [r.base is args[0] for r in res] + [r.strides for r in res]
    return {"f": f, "args": lambda i: (R(i, 3, 3),), "post": post}


@case()
def result_strides_and_contiguity():
    def f(x):
        return (x * 2).T, x.sum(axis=0), tt.transpose(x * 1)

    def post(res, args):
        return [(r.strides, r.flags.c_contiguous, r.flags.writeable) for r in res]
    return {"f": f, "args": lambda i: (R(i, 3, 4),), "post": post}


@case()
def return_string_from_value():
    def f(x):
        return f"{x.sum().item():.3f}", x * 1
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_generator_consumed_by_list():
    def f(x):
        return list(x * k for k in range(3))
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_none_only():
    sink = {}

    def f(x):
        return None
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: sink}


@case()
def return_tensor_requires_grad_made_inside():
    def f(x):
        w = tt.tensor(x * 2, requires_grad=True)
        return w, tt.sum(w * w)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def return_detached_and_no_grad():
    w = tt.tensor(R(0, 3), requires_grad=True)

    def f(x):
        a = (w * x).detach()
        with tt.no_grad():
            b = w * 2
        return a, b, w * x
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: w}


# ----------------------------------------------------------------------------- 6. re-entrancy,
# grad modes, exceptions, context managers, ordering


@case()
def compiled_inside_compiled():
    inner = tt.compile(lambda x: tt.tanh(x) * 2)

    def f(x):
        return inner(x) + inner(x * 2)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def compiled_inside_grad():
    inner = tt.compile(lambda x: tt.sum(tt.sin(x) * x))

    def f(x):
        return tt.grad(inner)(x)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def grad_of_compiled_eager_side():
    def f(x):
        return tt.grad(lambda v: tt.sum(tt.exp(v) * v))(x)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def vmap_inside():
    def f(xs):
        return tt.vmap(lambda v: tt.sum(v * v))(xs)
    return {"f": f, "args": lambda i: (R(i, 4, 3),)}


@case()
def jvp_inside():
    def f(x, t):
        return tt.jvp(lambda v: tt.sin(v) * v, (x,), (t,))
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 3, seed=1))}


@case()
def hvp_inside_with_closure_change():
    k = {"a": 1.0}

    def f(x, v):
        return tt.hvp(lambda w: tt.sum(w ** 3) * k["a"], (x,), (v,))

    def change(i):
        k["a"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 3, seed=1)), "change": change}


@case()
def no_grad_inside_with_param():
    w = tt.tensor(R(0, 3), requires_grad=True)

    def f(x):
        with tt.no_grad():
            a = w * x
        b = w * x
        return a, b
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: w}


@case()
def enable_grad_inside_no_grad_call():
    w = tt.tensor(R(0, 3), requires_grad=True)

    def f(x):
        with tt.enable_grad():
            return w * x
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: w, "wrap": _no_grad_on_odd}


@case()
def set_grad_enabled_from_config():
    w = tt.tensor(R(0, 3), requires_grad=True)
    cfg = {"train": True}

    def f(x):
        with tt.set_grad_enabled(cfg["train"]):
            return w * x

    def change(i):
        cfg["train"] = not cfg["train"]
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change, "state": lambda: w}


@case()
def no_grad_decorated_helper():
    w = tt.tensor(R(0, 3), requires_grad=True)

    @tt.no_grad()
    def helper(x):
        return w * x

    def f(x):
        return helper(x) + w
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: w}


@case()
def backward_on_compiled_result_each_call():
    w = tt.tensor(R(0, 3), requires_grad=True)

    def f(x):
        return tt.sum(tt.tanh(w * x))
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: w,
            "post": lambda r, a: (r.backward(), w.grad.copy())[1]}


@case()
def errstate_inside():
    def f(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(x), x / 0.0
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def errstate_raise_inside():
    def f(x):
        with np.errstate(divide="raise"):
            return 1.0 / x
    return {"f": f, "args": lambda i: (R(i, 3) * (0 if i == 4 else 1),)}


@case()
def custom_context_manager_scale():
    class Scale:
        cur = 1.0

        def __init__(self, v):
            self.v = v

        def __enter__(self):
            self.old, Scale.cur = Scale.cur, self.v
            return self

        def __exit__(self, *a):
            Scale.cur = self.old

    def f(x):
        with Scale(3.0):
            y = x * Scale.cur
        return y + x * Scale.cur
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def contextlib_contextmanager_inside():
    import contextlib
    cfg = {"s": 1.0}

    @contextlib.contextmanager
    def scaled(v):
        old = cfg["s"]
        cfg["s"] = v
        try:
            yield
        finally:
            cfg["s"] = old

    def f(x):
        with scaled(2.0):
            y = x * cfg["s"]
        return y * cfg["s"]
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: cfg}


@case()
def contextlib_suppress_value_error():
    import contextlib

    def f(x):
        y = x * 1
        with contextlib.suppress(ValueError):
            if float(x.sum()) > 0:
                raise ValueError
            y = x * 2
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def exception_caught_not_value_dependent():
    def f(x):
        try:
            {}["missing"]
        except KeyError:
            y = x * 2
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def exception_shape_error_caught():
    def f(x, y):
        try:
            return x @ y
        except ValueError:
            return x.sum() * y.sum()
    return {"f": f, "args": lambda i: (R(i, 2, 3), R(i, 3 if i % 2 else 4, 2))}


@case()
def exception_raised_and_reraised_with_note():
    def f(x):
        try:
            if float(x.max()) > 2.0:
                raise OverflowError("big")
        except OverflowError:
            raise
        return x
    return {"f": f, "args": lambda i: (R(i, 3) + (3.0 if i in (4, 7) else 0.0),)}


@case()
def generator_function_helper_consumed():
    def gen(x):
        for k in range(3):
            yield x * k

    def f(x):
        return list(gen(x))
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def generator_helper_with_value_break():
    def gen(x):
        while True:
            x = x * 0.5
            yield x

    def f(x):
        for y in gen(x):
            if float(tt.max(tt.abs(y))) < 0.1:
                return y
    return {"f": f, "args": lambda i: (R(i, 3) * (i + 1),)}


@case()
def generator_send_protocol():
    def acc():
        total = 0.0
        while True:
            v = yield total
            total = total + v

    def f(x):
        g = acc()
        next(g)
        g.send(x)
        return g.send(x * 2)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def iterator_over_tensor_rows():
    def f(x):
        return [r * 2 for r in x]
    return {"f": f, "args": lambda i: (R(i, 3, 2),)}


@case()
def iter_next_on_global_iterator_refused_or_equal():
    it = iter(range(1000))

    def f(x):
        return x * next(it)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def itertools_accumulate():
    import itertools

    def f(x):
        return list(itertools.accumulate([x, x * 2, x * 3]))
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def itertools_count_global():
    import itertools
    c = itertools.count()

    def f(x):
        return x * next(c)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def order_of_draws_two_generators():
    r1, r2 = np.random.default_rng(1), np.random.default_rng(2)

    def f(x):
        a = tt.randn(3, rng=r2)
        b = tt.randn(3, rng=r1)
        return x * a + b
    return {"f": f, "args": lambda i: (R(i, 3),),
            "state": lambda: (r1.bit_generator.state, r2.bit_generator.state)}


@case()
def draw_skipped_on_value_branch():
    rng = np.random.default_rng(3)

    def f(x):
        if float(x.sum()) > 0:
            return x + tt.randn(3, rng=rng)
        return x
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: rng.bit_generator.state}


@case()
def draw_count_from_number_arg():
    rng = np.random.default_rng(4)

    def f(x, n):
        for _ in range(n):
            x = x + tt.rand(3, rng=rng)
        return x
    return {"f": f, "args": lambda i: (R(i, 3), i % 3), "state": lambda: rng.bit_generator.state}


@case()
def global_rng_randn():
    def f(x):
        return x * tt.randn(3)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def generator_replaced_between_calls():
    box = {"rng": np.random.default_rng(5)}

    def f(x):
        return x + tt.randn(3, rng=box["rng"])

    def change(i):
        box["rng"] = np.random.default_rng(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change,
            "state": lambda: box["rng"].bit_generator.state}


@case()
def generator_state_reset_outside():
    rng = np.random.default_rng(6)
    st = rng.bit_generator.state

    def f(x):
        return x + tt.rand(3, rng=rng)

    def change(i):
        rng.bit_generator.state = st
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change,
            "state": lambda: rng.bit_generator.state}


@case()
def generator_passed_as_argument():
    def f(x, rng):
        return x + tt.randn(3, rng=rng)
    gens = {}

    def args(i):
        gens.setdefault("g", np.random.default_rng(7))
        if i == 5:
            gens["g"] = np.random.default_rng(8)
        return R(i, 3), gens["g"]
    return {"f": f, "args": args, "state": lambda: gens["g"].bit_generator.state}


@case()
def seed_int_argument_generator_inside():
    def f(x, seed):
        return x + tt.randn(3, rng=seed)
    return {"f": f, "args": lambda i: (R(i, 3), i % 4)}


# ----------------------------------------------------------------------------- 7. unusual Python


@case()
def class_swapped_with_dunder_class():
    class A:
        def run(self, x):
            return x * 2

    class B:
        def run(self, x):
            return x * 3

    obj = A()

    def f(x):
        return obj.run(x)

    def change(i):
        obj.__class__ = B if i == 2 else A
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def classmethod_reads_cls_attr():
    class K:
        s = 1.0

        @classmethod
        def scale(cls, x):
            return x * cls.s

    def change(i):
        K.s = float(i)
    return {"f": lambda x: K.scale(x), "args": lambda i: (R(i, 3),), "change": change}


@case()
def staticmethod_reads_global_dict():
    table = {"s": 1.0}

    class K:
        @staticmethod
        def scale(x):
            return x * table["s"]

    def change(i):
        table["s"] = float(i)
    return {"f": lambda x: K.scale(x), "args": lambda i: (R(i, 3),), "change": change}


@case()
def super_call_in_subclass():
    class Base:
        k = 1.0

        def run(self, x):
            return x * self.k

    class Sub(Base):
        def run(self, x):
            return super().run(x) + 1

    s = Sub()

    def change(i):
        Base.k = float(i)
    return {"f": lambda x: s.run(x), "args": lambda i: (R(i, 3),), "change": change}


@case()
def base_class_method_replaced():
    class Base:
        def act(self, x):
            return tt.tanh(x)

    class Sub(Base):
        def run(self, x):
            return self.act(x) * 2

    s = Sub()

    def change(i):
        Base.act = lambda self, x: tt.sin(x)
    return {"f": lambda x: s.run(x), "args": lambda i: (R(i, 3),), "change": change}


@case(xfail="an attribute found on the metaclass (K.gain from Meta) is not guarded")
def metaclass_attribute():
    class Meta(type):
        gain = 1.0

    class K(metaclass=Meta):
        pass

    def f(x):
        return x * K.gain

    def change(i):
        Meta.gain = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def singledispatch_registered_later():
    @functools.singledispatch
    def scale(v):
        return 1.0

    class Tag:
        pass

    tag = Tag()

    def f(x):
        return x * scale(tag)

    def change(i):
        scale.register(Tag, lambda v: float(i))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def cached_property_invalidated():
    class M:
        def __init__(self):
            self.base = 1.0

        @functools.cached_property
        def s(self):
            return self.base * 2

    m = M()

    def f(x):
        return x * m.s

    def change(i):
        m.base = float(i)
        m.__dict__.pop("s", None)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def weakref_proxy_config():
    import weakref

    class C:
        def __init__(self):
            self.s = 1.0

    c = C()
    p = weakref.proxy(c)

    def f(x):
        return x * p.s

    def change(i):
        c.s = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def eval_string_expression():
    cfg = {"expr": "x * 2"}

    def f(x):
        return eval(cfg["expr"], {"x": x, "tt": tt})

    def change(i):
        cfg["expr"] = "x * 3" if i == 2 else "tt.tanh(x)"
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def exec_defined_helper():
    ns = {"tt": tt}
    exec("def helper(x):\n    return x * K\nK = 2.0", ns)

    def f(x):
        return ns["helper"](x)

    def change(i):
        ns["K"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def globals_dict_of_helper_module():
    mod = types.ModuleType("hmod")
    exec("def helper(x):\n    return x * K\nK = 2.0", mod.__dict__)

    def f(x):
        return mod.helper(x)

    def change(i):
        mod.K = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def sys_modules_lookup():
    import sys
    mod = types.ModuleType("r19a_cfg_mod")
    mod.K = 1.0
    sys.modules["r19a_cfg_mod"] = mod

    def f(x):
        return x * sys.modules["r19a_cfg_mod"].K

    def change(i):
        mod.K = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def os_environ_flag():
    import os
    os.environ["R19A_FLAG"] = "0"

    def f(x):
        return x * 2 if os.environ.get("R19A_FLAG") == "1" else x

    def change(i):
        os.environ["R19A_FLAG"] = "1" if i == 2 else "0"
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def instance_dict_via_setattr_outside():
    class M:
        pass

    m = M()
    setattr(m, "scale-x", 1.0)

    def f(x):
        return x * getattr(m, "scale-x")

    def change(i):
        setattr(m, "scale-x", float(i))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def callable_object_with_call_state():
    class Sched:
        def __init__(self):
            self.t = 0

        def __call__(self):
            return 0.5 ** self.t

    s = Sched()

    def f(x):
        return x * s()

    def change(i):
        s.t = i
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def bound_method_of_other_object():
    class A:
        def __init__(self, k):
            self.k = k

        def run(self, x):
            return x * self.k

    box = {"m": A(1.0).run}

    def f(x):
        return box["m"](x)

    def change(i):
        box["m"].__self__.k = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def lambda_in_list_rebound():
    acts = [tt.tanh]

    def f(x):
        return acts[0](x)

    def change(i):
        acts[0] = tt.sin if i == 2 else tt.relu
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def numpy_function_in_config():
    cfg = {"red": np.sum}

    def f(x):
        return x * cfg["red"](np.arange(3.0))

    def change(i):
        cfg["red"] = np.prod if i == 2 else np.max
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def dataclass_with_numpy_field():
    @dataclasses.dataclass
    class C:
        w: np.ndarray

    c = C(np.ones(3))

    def f(x):
        return x * c.w

    def change(i):
        c.w[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def dataclass_with_tensor_field():
    @dataclasses.dataclass
    class C:
        w: object

    c = C(tt.tensor(np.ones(3)))

    def f(x):
        return x * c.w

    def change(i):
        c.w = tt.tensor(np.full(3, float(i)))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def slots_dataclass():
    @dataclasses.dataclass(slots=True)
    class C:
        s: float = 1.0

    c = C()

    def f(x):
        return x * c.s

    def change(i):
        c.s = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def nested_dataclass():
    @dataclasses.dataclass
    class Inner:
        s: float = 1.0

    @dataclasses.dataclass
    class Outer:
        inner: Inner = dataclasses.field(default_factory=Inner)

    o = Outer()

    def f(x):
        return x * o.inner.s

    def change(i):
        o.inner.s = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def enum_member_value_via_lookup():
    class Lvl(enum.Enum):
        LOW = 0.5
        HIGH = 2.0

    cur = {"name": "LOW"}

    def f(x):
        return x * Lvl[cur["name"]].value

    def change(i):
        cur["name"] = "HIGH" if i == 2 else "LOW"
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def flag_enum_bits():
    class Opt(enum.Flag):
        A = enum.auto()
        B = enum.auto()

    cur = {"o": Opt.A}

    def f(x):
        y = x
        if Opt.A in cur["o"]:
            y = y * 2
        if Opt.B in cur["o"]:
            y = y + 1
        return y

    def change(i):
        cur["o"] = cur["o"] | Opt.B
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def match_on_dataclass_pattern():
    @dataclasses.dataclass
    class Act2:
        kind: str
        alpha: float = 0.1

    cur = {"a": Act2("tanh")}

    def f(x):
        match cur["a"]:
            case Act2(kind="tanh"):
                return tt.tanh(x)
            case Act2(kind="leaky", alpha=al):
                return tt.maximum(x, x * al)
        return x

    def change(i):
        cur["a"] = Act2("leaky", 0.01 * i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def match_on_dict_pattern():
    cfg = {"type": "scale", "k": 2.0}

    def f(x):
        match cfg:
            case {"type": "scale", "k": k}:
                return x * k
            case {"type": "shift", "k": k}:
                return x + k
        return x

    def change(i):
        cfg["type"] = "shift" if i == 2 else "scale"
        cfg["k"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def star_args_forwarding():
    def helper(*xs, **kw):
        return sum(x * kw.get("s", 1.0) for x in xs)

    kw = {"s": 1.0}

    def f(a, b):
        return helper(a, b, **kw)

    def change(i):
        kw["s"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 3, seed=1)), "change": change}


@case()
def recursion_depth_from_value():
    def rec(x, d):
        if d == 0 or float(tt.max(x)) < 0.5:
            return x
        return rec(x * 0.5, d - 1)
    return {"f": lambda x: rec(x, 6), "args": lambda i: (np.abs(R(i, 3)) * (i + 1),)}


@case()
def global_statement_read_only():
    return {"f": _read_module_gain, "args": lambda i: (R(i, 3),),
            "change": lambda i: globals().__setitem__("MODULE_GAIN", float(i))}


MODULE_GAIN = 1.0


def _read_module_gain(x):
    return x * MODULE_GAIN


@case()
def module_global_list_via_function_default_alias():
    return {"f": _read_module_list, "args": lambda i: (R(i, 3),),
            "change": lambda i: MODULE_LIST.append(float(i))}


MODULE_LIST = [1.0]


def _read_module_list(x, ws=MODULE_LIST):
    return x * ws[-1]


@case()
def module_global_tensor_rebound():
    return {"f": _read_module_tensor, "args": lambda i: (R(i, 3),),
            "change": lambda i: globals().__setitem__("MODULE_T", tt.tensor(np.full(3, i * 1.0)))}


MODULE_T = tt.tensor(np.ones(3))


def _read_module_tensor(x):
    return x * MODULE_T


# ----------------------------------------------------------------------------- 8. modules and
# Tensors changed between calls


def _mlp(seed=0):
    return tt.nn.Sequential(tt.nn.Linear(3, 4, rng=seed), tt.nn.Tanh(),
                            tt.nn.Linear(4, 2, rng=seed + 1))


def _params(m):
    return [p for p in m.parameters()]


@case()
def module_eval_train_toggle_dropout():
    m = tt.nn.Sequential(tt.nn.Linear(3, 4, rng=0), tt.nn.Dropout(0.5))

    def change(i):
        m.eval() if i == 2 else m.train()
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def module_requires_grad_toggled_outside():
    m = _mlp()

    def change(i):
        for p in m[0].parameters():
            p.requires_grad_(i != 2)
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def module_parameter_replaced():
    m = _mlp()

    def change(i):
        m[0].weight = tt.nn.Parameter(np.full_like(m[0].weight.data, 0.1 * i))
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def module_data_rebound_other_dtype():
    m = _mlp()

    def change(i):
        m[2].bias.data = m[2].bias.data.astype(np.float64) + i
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def module_to_float64_between_calls():
    m = _mlp()

    def change(i):
        m.to(np.float64 if i == 2 else np.float32)
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3, dtype=np.float32),),
            "change": change,
            "state": lambda: _params(m)}


@case()
def module_submodule_swapped():
    class Net(tt.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tt.nn.Linear(3, 2, rng=0)
            self.act = tt.nn.Tanh()

        def forward(self, x):
            return self.act(self.lin(x))

    net = Net()

    def change(i):
        net.act = tt.nn.ReLU() if i == 2 else tt.nn.Sigmoid()
    return {"f": lambda x: net(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(net)}


@case()
def module_plain_attribute_flag():
    class Net(tt.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tt.nn.Linear(3, 2, rng=0)
            self.use_act = True

        def forward(self, x):
            y = self.lin(x)
            return tt.tanh(y) if self.use_act else y

    net = Net()

    def change(i):
        net.use_act = not net.use_act
    return {"f": lambda x: net(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(net)}


@case()
def module_list_attribute_of_floats():
    class Net(tt.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tt.nn.Linear(3, 2, rng=0)
            self.scales = [1.0, 2.0]

        def forward(self, x):
            return self.lin(x) * self.scales[1]

    net = Net()

    def change(i):
        net.scales[1] = float(i)
    return {"f": lambda x: net(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(net)}


@case()
def module_numpy_array_attribute():
    class Net(tt.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tt.nn.Linear(3, 2, rng=0)
            self.mask = np.ones(2)

        def forward(self, x):
            return self.lin(x) * self.mask

    net = Net()

    def change(i):
        net.mask[0] = 0.0 if i == 2 else 5.0
    return {"f": lambda x: net(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(net)}


@case()
def module_forward_hook_added():
    m = _mlp()

    def change(i):
        m[0].register_forward_hook(lambda mod, inp, out: out * 2)
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def module_forward_pre_hook_reading_global():
    m = _mlp()
    cfg = {"s": 1.0}
    m[0].register_forward_pre_hook(lambda mod, inp: (inp[0] * cfg["s"],))

    def change(i):
        cfg["s"] = float(i)
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def module_hook_removed():
    m = _mlp()
    h = m[0].register_forward_hook(lambda mod, inp, out: out * 2)

    def change(i):
        h.remove()
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def module_load_state_dict_between():
    m = _mlp()
    other = _mlp(seed=5)

    def change(i):
        m.load_state_dict(other.state_dict())
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def module_method_monkeypatched_forward():
    m = tt.nn.Linear(3, 2, rng=0)

    def change(i):
        m.forward = lambda x: x.sum(axis=1, keepdims=True) * float(i)
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change}


@case()
def leaky_relu_slope_changed():
    m = tt.nn.Sequential(tt.nn.Linear(3, 3, rng=0), tt.nn.LeakyReLU(0.1))

    def change(i):
        m[1].negative_slope = 0.01 * i
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def dropout_p_changed():
    m = tt.nn.Sequential(tt.nn.Linear(3, 3, rng=0), tt.nn.Dropout(0.1))

    def change(i):
        m[1].p = 0.05 * i
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 4, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def layernorm_eps_changed():
    m = tt.nn.LayerNorm(3)

    def change(i):
        m.eps = 10.0 ** -i
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: _params(m)}


@case()
def batchnorm_momentum_changed_and_eval():
    m = tt.nn.BatchNorm1d(3)

    def change(i):
        if i == 2:
            m.momentum = 0.5
        else:
            m.eval()
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 4, 3),), "change": change,
            "state": lambda: (_params(m), m.running_mean, m.running_var)}


@case()
def tensor_inplace_outside_between_calls():
    w = tt.tensor(np.ones(3))

    def change(i):
        w.data[0] = float(i)
    return {"f": lambda x: x * w, "args": lambda i: (R(i, 3),), "change": change,
            "state": lambda: w}


@case()
def tensor_data_rebound_float32():
    w = tt.tensor(np.ones(3))

    def change(i):
        w.data = np.full(3, float(i), dtype=np.float32 if i == 2 else np.float64)
    return {"f": lambda x: x * w, "args": lambda i: (R(i, 3, dtype=np.float32),), "change": change,
            "state": lambda: w}


@case()
def tensor_data_rebound_int():
    w = tt.tensor(np.ones(3))

    def change(i):
        w.data = np.arange(3) * i
    return {"f": lambda x: x * w, "args": lambda i: (R(i, 3, dtype=np.float32),), "change": change,
            "state": lambda: w}


@case()
def tensor_data_rebound_to_view():
    w = tt.tensor(np.ones(3))
    base = np.arange(6.0)

    def change(i):
        w.data = base[::2]
        base[0] = 10.0 * i
    return {"f": lambda x: x * w, "args": lambda i: (R(i, 3),), "change": change,
            "state": lambda: w}


@case()
def tensor_data_rebound_shape_broadcast():
    w = tt.tensor(np.ones(3))

    def change(i):
        w.data = np.ones((2, 3)) * i
    return {"f": lambda x: x * w, "args": lambda i: (R(i, 3),), "change": change,
            "state": lambda: w}


@case()
def tensor_requires_grad_set_outside():
    w = tt.tensor(np.ones(3))

    def change(i):
        w.requires_grad_(i == 2)
    return {"f": lambda x: tt.sum(x * w), "args": lambda i: (R(i, 3),), "change": change,
            "state": lambda: w}


@case()
def tensor_detach_inplace_alias_outside():
    w = tt.tensor(np.ones(3), requires_grad=True)
    d = w.detach()

    def change(i):
        d.data[...] = float(i)
    return {"f": lambda x: x * w, "args": lambda i: (R(i, 3),), "change": change,
            "state": lambda: w}


@case()
def parameter_list_appended_outside():
    ps = tt.nn.ParameterList([tt.nn.Parameter(np.ones(3))])

    def f(x):
        return sum(x * p for p in ps)

    def change(i):
        ps.append(tt.nn.Parameter(np.full(3, float(i))))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change, "state": lambda: list(ps)}


@case()
def module_dict_key_added():
    md = tt.nn.ModuleDict({"a": tt.nn.Linear(3, 3, rng=0)})

    def f(x):
        for k in md:
            x = md[k](x)
        return x

    def change(i):
        md[f"k{i}"] = tt.nn.Linear(3, 3, rng=i)
    return {"f": f, "args": lambda i: (R(i, 2, 3),), "change": change}


@case()
def module_training_flag_read_in_custom_forward():
    class Net(tt.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tt.nn.Linear(3, 2, rng=0)

        def forward(self, x):
            y = self.lin(x)
            return y * 2 if self.training else y

    net = Net()

    def change(i):
        net.lin.eval() if i == 2 else net.train(i % 2 == 0)
    return {"f": lambda x: net(x), "args": lambda i: (R(i, 2, 3),), "change": change}


@case()
def optimizer_step_outside_each_call_with_grad_inside():
    m = tt.nn.Linear(3, 1, rng=0)
    opt = tt.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def f(x, y):
        opt.zero_grad()
        loss = tt.mean((m(x) - y) ** 2)
        loss.backward()
        return loss

    def post(res, args):
        opt.step()
        return None

    def change(i):
        opt.param_groups[0]["lr"] = 0.05 * i
    return {"f": f, "args": lambda i: (R(i, 4, 3), R(i, 4, 1, seed=1)), "post": post,
            "change": change, "state": lambda: _params(m)}


@case()
def whole_step_with_python_float_loss_after():
    m = tt.nn.Linear(3, 1, rng=0)
    opt = tt.optim.Adam(m.parameters(), lr=0.01)

    def f(x, y):
        opt.zero_grad()
        loss = tt.mean((m(x) - y) ** 2)
        loss.backward()
        opt.step()
        return loss

    return {"f": f, "args": lambda i: (R(i, 4, 3), R(i, 4, 1, seed=1)),
            "post": lambda r, a: float(r), "state": lambda: (_params(m), opt.state_dict())}


# ----------------------------------------------------------------------------- 9. more NumPy
# buffers, container kinds, complex


@case()
def local_buffer_isub_from_arg():
    def f(x):
        y = np.ones(3) * 2
        y -= x
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def local_buffer_iadd_tensor_arg():
    def f(x):
        y = np.zeros(3)
        y += x
        return y
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 3)),)}


@case()
def local_buffer_np_add_out():
    def f(x):
        y = np.zeros(3)
        np.add(y, x, out=y)
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def local_buffer_ellipsis_assign():
    def f(x):
        y = np.zeros(3)
        y[...] = x
        return y * 2
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def local_buffer_imul_by_number_arg():
    def f(x, a):
        y = np.ones(3)
        y *= a
        return x * y
    return {"f": f, "args": lambda i: (R(i, 3), 0.5 * (i + 1))}


@case()
def local_buffer_iadd_from_sum():
    def f(x):
        acc = np.zeros(())
        acc += x.sum()
        return acc
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def local_python_float_accumulate():
    def f(x):
        acc = 0.0
        for v in x:
            acc += v
        return acc
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def local_list_of_arrays_inplace():
    def f(x):
        bufs = [np.zeros(3), np.zeros(3)]
        bufs[0] += x
        bufs[1] += 2 * x
        return bufs
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def arg_copy_then_inplace():
    def f(x):
        y = x.copy()
        y += 1
        y *= x
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def arg_np_array_copy_then_inplace():
    def f(x):
        y = np.array(x)
        y += 1
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def closure_float32_buffer_iadd_result():
    def f(x):
        y = np.zeros(3, dtype=np.float32)
        y += x
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def complex_method_conj_product():
    def f(z):
        return z.conj() * z
    return {"f": f, "args": lambda i: (R(i, 3) + 1j * R(i, 3, seed=1),)}


@case()
def complex_abs_squared():
    def f(z):
        return abs(z) ** 2, z.real ** 2 + z.imag ** 2
    return {"f": f, "args": lambda i: (R(i, 3) + 1j * R(i, 3, seed=1),)}


@case()
def complex_times_conj_tensor():
    def f(z):
        return z * z.conj()
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 3) + 1j * R(i, 3, seed=1)),)}


@case()
def complex_self_mul_variants():
    def f(z, w):
        return z * w.conj(), z.conj() * w, np.vdot(z, w)
    return {"f": f, "args": lambda i: (R(i, 3) + 1j * R(i, 3, seed=1), R(i, 3, seed=2) + 0.5j)}


@case()
def complex64_ops():
    def f(z):
        return z * 2, z * z, tt.abs(z)
    return {"f": f, "args": lambda i: ((R(i, 3) + 1j * R(i, 3, seed=1)).astype(np.complex64),)}


@case()
def argument_dict_subclass():
    def f(d):
        return d["a"] * 2
    return {"f": f, "args": lambda i: (ArgDict(a=R(i, 3)),)}


@case()
def argument_ordereddict_order_changes():
    def f(d):
        return [v * 2 for v in d.values()]

    def args(i):
        items = [("a", R(i, 3)), ("b", R(i, 2))]
        return (collections.OrderedDict(items if i < 5 else items[::-1]),)
    return {"f": f, "args": args}


@case()
def argument_dict_key_order_changes():
    def f(d):
        return [v * 2 for v in d.values()], list(d)

    def args(i):
        items = [("a", R(i, 3)), ("b", R(i, 3))]
        return (dict(items if i < 5 else items[::-1]),)
    return {"f": f, "args": args}


@case()
def argument_tuple_subclass():
    def f(t):
        return t[0] * t[1]
    return {"f": f, "args": lambda i: (ArgTuple((R(i, 3), R(i, 3, seed=1))),)}


@case()
def argument_list_subclass_with_attr():
    def f(t):
        return t[0] * t.scale

    def args(i):
        lst = ArgList([R(i, 3)])
        lst.scale = float(i)
        return (lst,)
    return {"f": f, "args": args}


@case()
def argument_namedtuple_with_number():
    def f(p):
        return p.a * p.b
    return {"f": f, "args": lambda i: (Pair(R(i, 3), 0.5 * i),)}


@case()
def argument_simplenamespace():
    def f(ns):
        return ns.x * ns.s
    return {"f": f, "args": lambda i: (types.SimpleNamespace(x=R(i, 3), s=0.5 * i),)}


@case()
def argument_dataclass_instance():
    def f(b):
        return b.x * b.s
    return {"f": f, "args": lambda i: (ArgBatch(R(i, 3), 0.5 * i),)}


@case()
def argument_object_with_array_attr():
    def f(b):
        return b.x * b.s
    return {"f": f, "args": lambda i: (ArgObj(R(i, 3), 0.5 * i),)}


@case()
def argument_string_changes():
    def f(x, mode):
        return tt.tanh(x) if mode == "tanh" else tt.relu(x)
    return {"f": f, "args": lambda i: (R(i, 3), "tanh" if i % 3 else "relu")}


@case()
def argument_none_vs_array():
    def f(x, b):
        return x if b is None else x + b
    return {"f": f, "args": lambda i: (R(i, 3), None if i % 2 else R(i, 3, seed=1))}


@case()
def argument_same_array_twice_then_distinct():
    def f(a, b):
        return a * b, a is b
    def args(i):
        x = R(i, 3)
        return (x, x) if i % 3 == 0 else (x, x.copy())
    return {"f": f, "args": args}


@case()
def argument_overlapping_views():
    def f(a, b):
        return a + b
    def args(i):
        base = R(i, 5)
        return base[:3], base[2:]
    return {"f": f, "args": args}


@case()
def argument_noncontiguous_then_contiguous():
    def f(a):
        return a.reshape(-1) * 2, a.ravel()
    return {"f": f, "args": lambda i: (R(i, 3, 4).T if i % 2 else R(i, 4, 3),)}


@case()
def argument_readonly_array():
    def f(a):
        return a * 2
    def args(i):
        a = R(i, 3)
        a.flags.writeable = i % 2 == 0
        return (a,)
    return {"f": f, "args": args}


@case()
def argument_big_endian():
    def f(a):
        return a * 2, a.dtype.byteorder
    return {"f": f, "args": lambda i: (R(i, 3).astype(">f8") if i % 2 else R(i, 3),)}


@case()
def argument_0d_vs_1d():
    def f(a):
        return a * 2, a.ndim
    return {"f": f, "args": lambda i: (np.array(1.0 * i) if i % 2 else np.array([1.0 * i]),)}


@case()
def argument_numpy_scalar_vs_0d_array():
    def f(x, a):
        return x * a
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32),
                                       np.float64(0.5) if i % 2 else np.array(0.5))}


@case()
def argument_int_array_vs_float_array():
    def f(a):
        return a / 2, a // 2
    return {"f": f, "args": lambda i: (np.arange(4) if i % 2 else np.arange(4.0),)}


@case()
def argument_masked_array():
    def f(a):
        return a * 2
    return {"f": f, "args": lambda i: (np.ma.array(R(i, 3), mask=[0, i % 2, 0]),)}


@case()
def argument_matrix_subclass_like_recarray():
    def f(a):
        return a * 2
    return {"f": f, "args": lambda i: (R(i, 3).view(np.recarray) if i % 2 else R(i, 3),)}


class ArgDictAttr(dict):
    scale = 1.0


class ArgTupleAttr(tuple):
    scale = 1.0


@case()
def argument_dict_subclass_with_attr():
    def f(d):
        return d["x"] * d.scale

    def args(i):
        d = ArgDictAttr(x=R(i, 3))
        d.scale = float(i)
        return (d,)
    return {"f": f, "args": args}


@case()
def argument_tuple_subclass_class_attr():
    def f(t):
        return t[0] * t.scale

    def change(i):
        ArgTupleAttr.scale = float(i)
    return {"f": f, "args": lambda i: (ArgTupleAttr((R(i, 3),)),), "change": change}


class PropTuple(collections.namedtuple("PropTuple", "x")):
    k = 1.0

    @property
    def scaled(self):
        return self.x * self.k


@case()
def argument_namedtuple_property():
    P = PropTuple

    def change(i):
        P.k = float(i)
    return {"f": lambda p: p.scaled, "args": lambda i: (P(R(i, 3)),), "change": change}


# ----------------------------------------------------------------------------- 10. warnings and
# other side effects


@case()
def user_warning_each_call():
    def f(x):
        if float(x.sum()) > 0:
            warnings.warn("positive sum", UserWarning, stacklevel=1)
        return x * 2
    return {"f": f, "args": lambda i: (R(i, 3),), "warn": True}


@case()
def user_warning_message_from_value():
    def f(x):
        warnings.warn(f"max={float(x.max()):.3f}", UserWarning, stacklevel=1)
        return x * 2
    return {"f": f, "args": lambda i: (R(i, 3),), "warn": True}


@case()
def user_warning_message_from_config():
    cfg = {"msg": "a"}

    def f(x):
        warnings.warn(cfg["msg"], UserWarning, stacklevel=1)
        return x

    def change(i):
        cfg["msg"] = f"m{i}"
    return {"f": f, "args": lambda i: (R(i, 3),), "warn": True, "change": change}


@case()
def numpy_runtime_warning_divide():
    def f(x):
        return x / (x - x)
    return {"f": f, "args": lambda i: (R(i, 3),), "warn": True}


@case()
def numpy_runtime_warning_log_of_arg():
    def f(x):
        return np.log(x)
    return {"f": f, "args": lambda i: (R(i, 3),), "warn": True}


@case()
def warning_category_deprecation():
    def f(x):
        warnings.warn("old", DeprecationWarning, stacklevel=2)
        return x + 1
    return {"f": f, "args": lambda i: (R(i, 3),), "warn": True}


@case()
def warnings_filter_inside_f():
    def f(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = np.log(x)
        return y
    return {"f": f, "args": lambda i: (R(i, 3),), "warn": True}


@case()
def local_closure_made_inside_f():
    def f(x):
        def scale(v):
            return v * x.sum()
        return scale(x) + scale(x * 2)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def nonlocal_inside_f_only():
    def f(x):
        total = x * 0

        def add(v):
            nonlocal total
            total = total + v
        for k in range(3):
            add(x * k)
        return total
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def local_list_sort_by_value():
    def f(xs):
        rows = list(xs)
        rows.sort(key=lambda r: float(r.sum()))
        return rows
    return {"f": f, "args": lambda i: ([R(i, 2, seed=k) for k in range(3)],)}


@case()
def walrus_in_comprehension():
    def f(x):
        ys = [y for k in range(3) if float((y := x * k).sum()) > 0]
        return ys, y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def global_assign_inside_refused():
    def f(x):
        global MODULE_SINK
        MODULE_SINK = float(i_counter[0])
        return x
    return {"f": f, "args": lambda i: (R(i, 3),)}


MODULE_SINK = 0.0
i_counter = [0]


@case()
def dict_setdefault_on_closure_refused_or_equal():
    cache = {}

    def f(x):
        k = cache.setdefault("k", 2.0)
        return x * k
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: cache}


@case()
def closure_cache_filled_outside_read_inside():
    cache = {}

    def f(x):
        return x * cache["k"] if "k" in cache else x

    def change(i):
        cache["k"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def list_pop_inside_refused_or_equal():
    q = [1.0, 2.0, 3.0] * 20

    def f(x):
        return x * q.pop()
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: q}


# ----------------------------------------------------------------------------- 11. type checks,
# exotic configuration holders, number arguments in NumPy functions


@case(xfail="isinstance(x, np.ndarray) on an array argument is False inside: the other branch")
def isinstance_ndarray_dispatch():
    def f(x):
        if isinstance(x, np.ndarray):
            return x * 2
        return x * 3
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case(xfail="type(x) is np.ndarray on an array argument is False inside: the other branch")
def type_is_ndarray_dispatch():
    def f(x):
        return x * 2 if type(x) is np.ndarray else x * 3
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def isinstance_tensor_dispatch_on_tensor_arg():
    def f(x):
        return x * 2 if isinstance(x, tt.Tensor) else x * 3
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 3)),)}


@case(xfail="type(x).__name__ of an array argument is not 'ndarray' inside: the other branch")
def class_name_dispatch():
    def f(x):
        return x * 2 if type(x).__name__ == "ndarray" else x * 3
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case(xfail="hasattr(x, 'requires_grad') on an array argument is True inside: the other branch")
def hasattr_grad_dispatch():
    def f(x):
        return x * 2 if hasattr(x, "requires_grad") else x * 3
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def contextvar_config():
    import contextvars
    cv = contextvars.ContextVar("r19a_scale", default=1.0)

    def f(x):
        return x * cv.get()

    def change(i):
        cv.set(float(i))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def threading_local_config():
    import threading
    loc = threading.local()
    loc.s = 1.0

    def f(x):
        return x * loc.s

    def change(i):
        loc.s = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(xfail="a ctypes.c_double's .value read inside is not guarded")
def ctypes_double_config():
    import ctypes
    c = ctypes.c_double(1.0)

    def f(x):
        return x * c.value

    def change(i):
        c.value = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def fraction_config():
    from fractions import Fraction
    cfg = {"s": Fraction(1, 2)}

    def f(x):
        return x * float(cfg["s"])

    def change(i):
        cfg["s"] = Fraction(i, 3)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def fraction_config_mutated_in_object():
    from fractions import Fraction
    box = types.SimpleNamespace(s=Fraction(1, 2))

    def f(x):
        return x * float(box.s)

    def change(i):
        box.s += Fraction(1, 3)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def decimal_config():
    from decimal import Decimal
    cfg = {"s": Decimal("0.5")}

    def f(x):
        return x * float(cfg["s"])

    def change(i):
        cfg["s"] = Decimal(i) / 4
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def module_level_getattr_pep562():
    mod = types.ModuleType("r19a_lazy")
    store = {"K": 1.0}

    def module_getattr(name):
        try:
            return store[name]
        except KeyError:
            raise AttributeError(name) from None
    mod.__getattr__ = module_getattr

    def f(x):
        return x * mod.K

    def change(i):
        store["K"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def property_getter_replaced_on_class():
    class M:
        s = property(lambda self: 1.0)

    m = M()

    def f(x):
        return x * m.s

    def change(i):
        M.s = property(lambda self: float(i))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def partialmethod_config():
    class M:
        def scale(self, x, k):
            return x * k
        double = functools.partialmethod(scale, k=2.0)

    m = M()

    def f(x):
        return m.double(x)

    def change(i):
        M.double = functools.partialmethod(M.scale, k=float(i))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def methodcaller_config():
    import operator
    box = {"call": operator.methodcaller("sum")}

    def f(x):
        return box["call"](x) * x

    def change(i):
        box["call"] = operator.methodcaller("max")
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def zero_d_array_config_inplace():
    s = np.array(1.0)

    def f(x):
        return x * s

    def change(i):
        s[...] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def zero_d_array_config_python_use():
    s = np.array(1.0)

    def f(x):
        return x * 2 if s > 0.5 else x

    def change(i):
        s[...] = 0.0 if i == 2 else 1.0
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(xfail="a dict inside a closed-over object array, changed outside, is missed")
def object_array_config():
    cfg = np.array([{"s": 1.0}], dtype=object)

    def f(x):
        return x * cfg[0]["s"]

    def change(i):
        cfg[0]["s"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def structured_array_config():
    cfg = np.zeros(1, dtype=[("s", "f8"), ("b", "f8")])
    cfg["s"] = 1.0

    def f(x):
        return x * cfg["s"][0] + cfg[0]["b"]

    def change(i):
        cfg[0]["b"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def np_float64_subclass_of_float_config():
    box = {"s": np.float64(1.0)}

    def f(x):
        return x * box["s"] if box["s"] > 0 else -x

    def change(i):
        box["s"] = np.float64(-i) if i == 2 else np.float64(i)
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32),), "change": change}


@case()
def number_args_in_np_where():
    def f(x, a, b):
        return np.where(x > 0, a, b), tt.where(x > 0, a, b)
    return {"f": f, "args": lambda i: (R(i, 4), 0.5 * i, -0.25 * i)}


@case()
def number_args_in_np_full():
    def f(x, a):
        return x + np.full(x.shape, a)
    return {"f": f, "args": lambda i: (R(i, 3), 0.5 * i)}


@case()
def number_args_in_np_linspace():
    def f(x, a):
        return x * np.linspace(0.0, a, 3)
    return {"f": f, "args": lambda i: (R(i, 3), 0.5 * (i + 1))}


@case()
def number_args_in_np_maximum():
    def f(x, lo):
        return np.maximum(x, lo), np.minimum(lo, x)
    return {"f": f, "args": lambda i: (R(i, 4), -0.1 * i)}


@case()
def number_args_in_np_clip_one_side():
    def f(x, lo):
        return np.clip(x, lo, None)
    return {"f": f, "args": lambda i: (R(i, 4), -0.1 * i)}


@case()
def number_args_in_tt_clip():
    def f(x, lo, hi):
        return tt.clip(x, lo, hi)
    return {"f": f, "args": lambda i: (R(i, 4), -0.1 * i, 0.1 * (i + 1))}


@case()
def number_args_in_array_method_clip():
    def f(x, lo, hi):
        return x.clip(lo, hi)
    return {"f": f, "args": lambda i: (R(i, 4), -0.1 * i, 0.1 * (i + 1))}


@case()
def number_args_in_np_power():
    def f(x, p):
        return np.power(np.abs(x), p)
    return {"f": f, "args": lambda i: (R(i, 4), 0.5 + 0.25 * i)}


@case()
def number_args_in_np_polyval():
    def f(c, a):
        return np.polyval(c, a)
    return {"f": f, "args": lambda i: (R(i, 3), 0.5 * i)}


@case()
def number_args_in_np_interp():
    def f(xp, a):
        return np.interp(a, np.arange(3.0), xp)
    return {"f": f, "args": lambda i: (R(i, 3), 0.3 * i)}


@case()
def number_args_in_np_isclose():
    def f(x, tol):
        return np.isclose(x, 0.0, atol=tol)
    return {"f": f, "args": lambda i: (R(i, 4), 0.5 * i)}


@case()
def number_args_np_sum_of_list():
    def f(x, a, b):
        return x * np.sum([a, b]), np.mean([a, b])
    return {"f": f, "args": lambda i: (R(i, 3), 0.5 * i, 0.25)}


@case()
def number_args_np_array_list():
    def f(x, a, b):
        return x[:2] * np.array([a, b])
    return {"f": f, "args": lambda i: (R(i, 3), 0.5 * i, 0.25)}


@case()
def number_args_np_asarray_dtype_f32():
    def f(x, a):
        return x * np.asarray(a, dtype=np.float32)
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32), 0.1 * i)}


@case()
def number_arg_fraction():
    from fractions import Fraction

    def f(x, a):
        return x * float(a)
    return {"f": f, "args": lambda i: (R(i, 3), Fraction(i, 3))}


@case()
def number_arg_decimal():
    from decimal import Decimal

    def f(x, a):
        return x * float(a)
    return {"f": f, "args": lambda i: (R(i, 3), Decimal(i) / 4)}


@case()
def number_arg_np_float16():
    def f(x, a):
        return x * a, a * 2
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float16), np.float16(0.1 * i))}


@case()
def number_arg_np_uint8_overflow():
    def f(x, a):
        return x + a, a + a
    return {"f": f, "args": lambda i: (np.array([1, 2], dtype=np.uint8), np.uint8(120 + i))}


@case()
def number_arg_np_longdouble():
    # (a float128 array's padding bytes are uninitialised memory, so its bytes are no oracle: the
    # value goes back as two float64 parts, hi + lo, which hold its 64-bit significand exactly;
    # the "differing" bits this case was marked for were the padding's)
    def f(x, a):
        y = x * a
        hi = y.astype(np.float64)
        return hi, (y - hi).astype(np.float64)
    return {"f": f, "args": lambda i: (R(i, 3), np.longdouble(0.1) * i)}


@case()
def number_arg_complex_np():
    def f(x, a):
        return x * a
    return {"f": f, "args": lambda i: (R(i, 3, dtype=np.float32), np.complex64(1 + 1j * i))}


@case()
def number_arg_int_used_as_float_exponent():
    def f(x, n):
        return x ** n, 2.0 ** n
    return {"f": f, "args": lambda i: (R(i, 3), i - 3)}


@case()
def number_arg_int_negative_power_int_array():
    def f(x, n):
        return x ** n
    return {"f": f, "args": lambda i: (np.arange(1, 4), 2 if i != 4 else -1)}


@case()
def number_arg_true_divide_ints():
    def f(x, a, b):
        return x * (a / b), x * (a // b)
    return {"f": f, "args": lambda i: (R(i, 3), i, 3)}


@case()
def number_arg_int_times_int_array_dtype():
    def f(x, a):
        return x * a
    return {"f": f, "args": lambda i: (np.array([1, 2], dtype=np.int16), 1000 * i)}


@case()
def number_arg_bool_times_array():
    def f(x, b):
        return x * b, b + b
    return {"f": f, "args": lambda i: (R(i, 3), i % 2 == 0)}


# ----------------------------------------------------------------------------- 12. objects
# replaced on every call (identity guards and reused ids)


@case(changes=tuple(range(1, 12)))
def fresh_lambda_every_call():
    box = {}

    def f(x):
        return box["fn"](x)

    def change(i):
        k = float(i)
        box["fn"] = lambda v: v * k
    box["fn"] = lambda v: v * 0.5
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_partial_every_call():
    def body(x, k):
        return x * k
    box = {"fn": functools.partial(body, k=0.5)}

    def f(x):
        return box["fn"](x)

    def change(i):
        box["fn"] = functools.partial(body, k=float(i % 3))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_module_every_call():
    box = {"m": tt.nn.Linear(3, 2, rng=0)}

    def f(x):
        return box["m"](x)

    def change(i):
        box["m"] = tt.nn.Linear(3, 2, rng=i % 3)
    return {"f": f, "args": lambda i: (R(i, 2, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_tensor_every_call():
    box = {"w": tt.tensor(np.ones(3))}

    def f(x):
        return x * box["w"]

    def change(i):
        box["w"] = tt.tensor(np.full(3, float(i % 3)))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_big_array_every_call():
    box = {"w": np.ones(5000)}

    def f(x):
        return x * tt.sum(box["w"][:3])

    def change(i):
        box["w"] = np.full(5000, float(i % 3))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_big_array_numpy_sum_every_call():
    box = {"w": np.ones(5000)}

    def f(x):
        return x * box["w"][:3]

    def change(i):
        box["w"] = np.full(5000, float(i % 3))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_bound_method_every_call():
    class A:
        def __init__(self, k):
            self.k = k

        def run(self, x):
            return x * self.k

    box = {"fn": A(0.5).run}

    def f(x):
        return box["fn"](x)

    def change(i):
        box["fn"] = A(float(i % 3)).run
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_class_every_call():
    def make(k):
        class C:
            s = k
        return C

    box = {"C": make(0.5)}

    def f(x):
        return x * box["C"].s

    def change(i):
        box["C"] = None
        gc.collect()
        box["C"] = make(float(i % 3))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_lambda_every_call_after_gc():
    box = {}

    def f(x):
        return box["fn"](x)

    def change(i):
        k = float(i)
        box["fn"] = None
        gc.collect()
        box["fn"] = lambda v: v * k
    box["fn"] = lambda v: v * 0.5
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_object_every_call_after_gc():
    class Obj2:
        def __init__(self, k):
            self.k = k

    box = {"o": Obj2(0.5)}

    def f(x):
        return x * box["o"].k

    def change(i):
        box["o"] = None
        gc.collect()
        box["o"] = Obj2(float(i % 3))
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_property_every_call():
    class M:
        s = property(lambda self: 0.5)

    m = M()

    def f(x):
        return x * m.s

    def change(i):
        k = float(i % 3)
        M.s = property(lambda self: k)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_staticmethod_every_call():
    class M:
        g = staticmethod(lambda x: x * 0.5)

    def f(x):
        return M.g(x)

    def change(i):
        k = float(i % 3)
        M.g = staticmethod(lambda x: x * k)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_classmethod_every_call():
    class M:
        k = 0.5

    M.g = classmethod(lambda cls, x: x * cls.k)

    def f(x):
        return M.g(x)

    def change(i):
        k = float(i % 3)
        M.g = classmethod(lambda cls, x: x * k)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_hook_every_call():
    m = tt.nn.Linear(3, 2, rng=0)
    box = {"h": None}

    def change(i):
        if box["h"] is not None:
            box["h"].remove()
        k = float(i % 3)
        box["h"] = m.register_forward_hook(lambda mod, inp, out: out * k)
    return {"f": lambda x: m(x), "args": lambda i: (R(i, 2, 3),), "change": change}


@case(changes=tuple(range(1, 12)))
def fresh_generator_object_every_call():
    box = {"rng": np.random.default_rng(0)}

    def f(x):
        return x + tt.randn(3, rng=box["rng"])

    def change(i):
        box["rng"] = np.random.default_rng(i % 3)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change,
            "state": lambda: box["rng"].bit_generator.state}


# ----------------------------------------------------------------------------- 13. the call's
# surroundings: grad mode, transforms of the compiled function, NumPy and warnings settings


def _no_grad_on_odd(i, fn, args):
    if i % 2:
        with tt.no_grad():
            return fn(*args)
    return fn(*args)


@case()
def no_grad_around_alternate_calls():
    w = tt.tensor(R(0, 3), requires_grad=True)
    return {"f": lambda x: tt.tanh(w * x), "args": lambda i: (R(i, 3),), "wrap": _no_grad_on_odd,
            "state": lambda: w}


@case()
def inference_mode_around_calls():
    w = tt.tensor(R(0, 3), requires_grad=True)

    def wrap(i, fn, args):
        if i % 3 == 0:
            with tt.inference_mode():
                return fn(*args)
        return fn(*args)
    return {"f": lambda x: w * x + 1, "args": lambda i: (R(i, 3),), "wrap": wrap,
            "state": lambda: w}


@case()
def set_grad_enabled_false_around_backward_inside():
    m = tt.nn.Linear(3, 1, rng=0)

    def f(x):
        loss = tt.sum(m(x) ** 2)
        with tt.enable_grad():
            return loss

    return {"f": f, "args": lambda i: (R(i, 2, 3),), "wrap": _no_grad_on_odd,
            "state": lambda: _params(m)}


@case()
def grad_of_compiled_outside():
    def wrap(i, fn, args):
        return tt.grad(fn)(*args)
    return {"f": lambda x: tt.sum(tt.sin(x) * x), "args": lambda i: (R(i, 3),), "wrap": wrap}


@case()
def value_and_grad_of_compiled_with_closure_change():
    cfg = {"k": 1.0}

    def wrap(i, fn, args):
        return tt.value_and_grad(fn)(*args)

    def change(i):
        cfg["k"] = float(i)
    return {"f": lambda x: tt.sum(tt.exp(x * cfg["k"])), "args": lambda i: (R(i, 3),),
            "wrap": wrap, "change": change}


@case()
def vmap_of_compiled_outside():
    def wrap(i, fn, args):
        return tt.vmap(fn)(*args)
    return {"f": lambda x: tt.sum(x * x) * 2, "args": lambda i: (R(i, 4, 3),), "wrap": wrap}


@case()
def jvp_of_compiled_outside():
    def wrap(i, fn, args):
        return tt.jvp(fn, args, (np.ones(3),))
    return {"f": lambda x: tt.tanh(x) * x, "args": lambda i: (R(i, 3),), "wrap": wrap}


@case()
def compiled_on_recorded_tensor_outside():
    w = tt.tensor(R(0, 3), requires_grad=True)

    def wrap(i, fn, args):
        out = fn(w * args[0])
        tt.sum(out).backward()
        return out
    return {"f": lambda v: tt.sin(v) * 2, "args": lambda i: (R(i, 3),), "wrap": wrap,
            "state": lambda: w}


@case()
def errstate_raise_around_some_calls():
    def wrap(i, fn, args):
        if i in (3, 4):
            with np.errstate(divide="raise"):
                return fn(*args)
        return fn(*args)
    return {"f": lambda x: 1.0 / (x * 0.0), "args": lambda i: (R(i, 3),), "wrap": wrap}


@case()
def warnings_error_around_some_calls():
    def wrap(i, fn, args):
        if i in (3, 4):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                return fn(*args)
        return fn(*args)
    return {"f": lambda x: np.log(x), "args": lambda i: (R(i, 3),), "wrap": wrap}


@case()
def warnings_error_user_warning_around():
    def f(x):
        warnings.warn("careful", UserWarning, stacklevel=1)
        return x * 2

    def wrap(i, fn, args):
        if i in (3, 4):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                return fn(*args)
        return fn(*args)
    return {"f": f, "args": lambda i: (R(i, 3),), "wrap": wrap}


@case()
def compile_disabled_between_calls():
    def wrap(i, fn, args):
        if i == 4:
            prev = tt.compile.disable()
            try:
                return fn(*args)
            finally:
                tt.compile.disable(prev)
        return fn(*args)
    return {"f": lambda x: tt.tanh(x), "args": lambda i: (R(i, 3),), "wrap": wrap}


@case()
def detect_anomaly_around():
    w = tt.tensor(R(0, 3), requires_grad=True)

    def wrap(i, fn, args):
        if i % 4 == 3:
            with tt.detect_anomaly():
                return fn(*args)
        return fn(*args)
    return {"f": lambda x: w * x, "args": lambda i: (R(i, 3),), "wrap": wrap, "state": lambda: w}


@case()
def called_from_another_thread():
    import threading
    w = tt.tensor(R(0, 3), requires_grad=True)

    def wrap(i, fn, args):
        if i % 3 != 1:
            return fn(*args)
        box = {}

        def run():
            box["r"] = fn(*args)
        t = threading.Thread(target=run)
        with tt.no_grad():
            t.start()
            t.join()
        return box["r"]
    return {"f": lambda x: w * x, "args": lambda i: (R(i, 3),), "wrap": wrap, "state": lambda: w}


@case()
def keyword_arguments_call():
    def f(x, y=None, *, scale=1.0):
        out = x * scale
        return out if y is None else out + y

    def wrap(i, fn, args):
        if i % 3 == 0:
            return fn(args[0], scale=0.5 * i)
        if i % 3 == 1:
            return fn(x=args[0], y=args[1])
        return fn(args[0], args[1], scale=2.0)
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 3, seed=1)), "wrap": wrap}


@case()
def varargs_call_changing_count():
    def f(*xs):
        return sum(xs)

    def wrap(i, fn, args):
        return fn(*args[: 1 + i % 3])
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 3, seed=1), R(i, 3, seed=2)), "wrap": wrap}


@case()
def kwargs_call_changing_keys():
    def f(**kw):
        return {k: v * 2 for k, v in kw.items()}

    def wrap(i, fn, args):
        return fn(**({"a": args[0], "b": args[1]} if i % 2 else {"b": args[1], "a": args[0]}))
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 3, seed=1)), "wrap": wrap}


@case()
def method_decorator_two_instances():
    class Net:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x * self.k

    def build_pair():
        return Net(1.0), Net(2.0)
    a, b = build_pair()

    def wrap(i, fn, args):
        return fn(a if i % 2 else b, *args)
    return {"f": lambda self, x: self(x), "args": lambda i: (R(i, 3),), "wrap": wrap}


# ----------------------------------------------------------------------------- 14. where the
# value lives: function attributes, enum members, deep and large containers


@case()
def function_attribute_config():
    def helper(x):
        return x * helper.scale
    helper.scale = 1.0

    def change(i):
        helper.scale = float(i)
    return {"f": lambda x: helper(x), "args": lambda i: (R(i, 3),), "change": change}


@case()
def function_attribute_of_outer_f():
    def f(x):
        return x * f.scale
    f.scale = 1.0

    def change(i):
        f.scale = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(xfail="an attribute set on an enum member (Lvl.LOW.scale) is not guarded")
def enum_member_custom_attribute():
    class Lvl(enum.Enum):
        LOW = 1
        HIGH = 2

    Lvl.LOW.scale = 1.0

    def f(x):
        return x * Lvl.LOW.scale

    def change(i):
        Lvl.LOW.scale = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(xfail="an enum member's list value changed in place is not guarded")
def enum_member_mutable_value():
    class Cfg3(enum.Enum):
        A = [1.0]

    def f(x):
        return x * Cfg3.A.value[0]

    def change(i):
        Cfg3.A.value[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def type_of_self_class_attr():
    class Net:
        k = 1.0

        def run(self, x):
            return x * type(self).k

    net = Net()

    def change(i):
        Net.k = float(i)
    return {"f": lambda x: net.run(x), "args": lambda i: (R(i, 3),), "change": change}


@case()
def dunder_class_attr():
    class Net:
        k = 1.0

        def run(self, x):
            return x * self.__class__.k

    net = Net()

    def change(i):
        Net.k = float(i)
    return {"f": lambda x: net.run(x), "args": lambda i: (R(i, 3),), "change": change}


@case(xfail="a value nested 10 containers deep in a closed-over dict is not guarded")
def deeply_nested_config():
    cfg = {"a": [{"b": [[{"c": (1.0, [2.0, {"d": [[[3.0]]]}])}]]}]}

    def f(x):
        return x * cfg["a"][0]["b"][0][0]["c"][1][1]["d"][0][0][0]

    def change(i):
        cfg["a"][0]["b"][0][0]["c"][1][1]["d"][0][0][0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def large_list_config_last_item():
    ws = [1.0] * 20000

    def f(x):
        return x * ws[-1]

    def change(i):
        ws[-1] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def large_dict_config_one_key():
    d = {f"k{j}": 1.0 for j in range(20000)}

    def f(x):
        return x * d["k19999"]

    def change(i):
        d["k19999"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def large_list_of_small_arrays():
    ws = [np.ones(3) for _ in range(3000)]

    def f(x):
        return x * ws[2999]

    def change(i):
        ws[2999][0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def small_array_inside_list_inplace():
    ws = [np.ones(3)]

    def f(x):
        return x * ws[0]

    def change(i):
        ws[0] *= 2
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def medium_array_4096_boundary():
    w = np.ones(4096)

    def f(x):
        return x * w[:3].sum()

    def change(i):
        w[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def medium_array_4097_tt_op():
    w = np.ones(4097)

    def f(x):
        return x * tt.sum(w[:3])

    def change(i):
        w[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def big_array_sliced_by_tensor_op():
    w = np.ones((5000,))

    def f(x):
        return tt.take(w, np.array([0, 1, 2])) * x

    def change(i):
        w[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def big_array_indexed_numpy_then_op():
    w = np.ones((5000,))

    def f(x):
        return x * w[0]

    def change(i):
        w[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def big_array_python_float_item():
    w = np.ones((5000,))

    def f(x):
        return x * float(w[0])

    def change(i):
        w[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def big_array_view_attribute_of_object():
    class Holder:
        def __init__(self):
            self.w = np.ones(5000)

    h = Holder()

    def f(x):
        return x * h.w[:3]

    def change(i):
        h.w[:3] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def big_2d_array_row_times_tensor():
    w = np.ones((100, 60))

    def f(x):
        return x * w[1, :3]

    def change(i):
        w[1, 0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def big_array_matmul_with_arg():
    w = np.ones((3, 5000))

    def f(x):
        return (x @ w)[:4]

    def change(i):
        w[0, 0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def big_array_ufunc_with_arg():
    w = np.ones(5000)

    def f(x):
        return np.multiply(x[0], w)[:3]

    def change(i):
        w[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def big_array_argument_inplace_between_calls():
    big = np.ones(5000)

    def f(x, b):
        return x * b[:3]

    def change(i):
        big[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3), big), "change": change}


# ----------------------------------------------------------------------------- 15. more control
# flow on values, as ported numerical code writes it


@case()
def zero_division_from_float_caught():
    def f(x):
        try:
            r = 1.0 / float(x.sum())
        except ZeroDivisionError:
            r = 0.0
        return x * r
    return {"f": f, "args": lambda i: (R(i, 3) * (0.0 if i % 4 == 3 else 1.0),)}


@case()
def python_max_with_key_on_values():
    def f(xs):
        return max(xs, key=lambda t: float(t.sum())) * 2
    return {"f": f, "args": lambda i: ([R(i, 3, seed=k) for k in range(3)],)}


@case()
def table_lookup_by_argmax():
    table = {0: 1.0, 1: 2.0, 2: 3.0}

    def f(x):
        return x * table[int(x.argmax())]

    def change(i):
        table[1] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def python_round_of_value():
    def f(x):
        return x * round(float(x.mean()), 1)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def assert_on_value():
    def f(x):
        assert float(x.min()) > -2.5, "too negative"
        return tt.sqrt(x + 3)
    return {"f": f, "args": lambda i: (R(i, 3) - (3.0 if i == 6 else 0.0),)}


@case()
def isfinite_early_return_none():
    def f(x):
        loss = tt.sum(tt.log(x))
        if not math.isfinite(float(loss)):
            return None
        return loss
    return {"f": f, "args": lambda i: (np.abs(R(i, 3)) * (-1 if i % 3 == 2 else 1),)}


@case()
def truthiness_of_one_element_tensor():
    def f(x):
        return x * 2 if x[0] else x
    return {"f": f, "args": lambda i: (np.array([float(i % 2), 1.0]),)}


@case()
def shape_from_value():
    def f(x):
        n = int(x.sum() > 0) + 1
        return tt.tile(x, n)
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def arange_length_from_item():
    def f(x, n):
        return tt.arange(int(n.item())) * x.sum()
    return {"f": f, "args": lambda i: (R(i, 3), np.array(1 + i % 4))}


@case()
def value_dependent_slice_bound():
    def f(x):
        k = int((x > 0).sum())
        return x[:k] * 2
    return {"f": f, "args": lambda i: (R(i, 5),)}


@case()
def while_true_break_else():
    def f(x):
        k = 0
        while True:
            x = x * 0.5
            k += 1
            if float(tt.max(tt.abs(x))) < 0.1 or k > 20:
                break
        return x, k
    return {"f": f, "args": lambda i: (R(i, 3) * (i + 1),)}


@case()
def lbfgs_like_two_loop_python_lists():
    def f(g, s_list, y_list):
        q = g
        alphas = []
        for s, y in zip(reversed(s_list), reversed(y_list)):
            rho = 1.0 / float(tt.sum(y * s))
            a = rho * tt.sum(s * q)
            alphas.append((rho, a))
            q = q - a * y
        return q, [a for _, a in alphas]
    return {"f": f, "args": lambda i: (R(i, 3), [R(i, 3, seed=k) for k in (1, 2)],
                                        [R(i, 3, seed=k) + 2.0 for k in (3, 4)])}


@case()
def conjugate_gradient_fixed_iters_with_tol():
    A = np.array([[4.0, 1.0], [1.0, 3.0]])

    def f(b):
        x = b * 0.0
        r = b - A @ x
        p = r
        rs = tt.sum(r * r)
        for _ in range(5):
            if float(rs) < 1e-20:
                break
            Ap = A @ p
            alpha = rs / tt.sum(p * Ap)
            x = x + alpha * p
            r = r - alpha * Ap
            rs_new = tt.sum(r * r)
            p = r + (rs_new / rs) * p
            rs = rs_new
        return x
    return {"f": f, "args": lambda i: (R(i, 2) * (0 if i == 4 else 1),)}


@case()
def armijo_with_python_float_state():
    def f(x, lr):
        fx = float(tt.sum(x ** 4))
        g = 4 * x ** 3
        while float(tt.sum((x - lr * g) ** 4)) > fx and lr > 1e-6:
            lr = lr * 0.5
        return x - lr * g, lr
    return {"f": f, "args": lambda i: (R(i, 3), 1.0)}


@case()
def gradient_clipping_python_norm():
    def f(gs):
        total = math.sqrt(sum(float(tt.sum(g * g)) for g in gs))
        c = min(1.0, 1.0 / (total + 1e-6))
        return [g * c for g in gs]
    return {"f": f, "args": lambda i: ([R(i, 3, seed=k) * (0.1 + i % 3) for k in range(2)],)}


@case()
def nan_to_num_guard_python():
    def f(x):
        y = tt.log(x)
        if np.isnan(y.data).any():
            y = tt.where(tt.isnan(y), 0.0, y)
        return y
    return {"f": f, "args": lambda i: (R(i, 3) + (3.0 if i % 2 else 0.0),)}


@case()
def np_all_on_data_branch():
    def f(x):
        if np.all(x.data > -1):
            return x * 2
        return x
    return {"f": f, "args": lambda i: (tt.tensor(R(i, 3)),)}


@case()
def np_any_on_argument_branch():
    def f(x):
        if np.any(x > 1):
            return x - 1
        return x
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def python_sum_of_bools():
    def f(x):
        n = sum(1 for v in x if v > 0)
        return x * n
    return {"f": f, "args": lambda i: (R(i, 4),)}


@case()
def numpy_scalar_comparison_chain():
    def f(x):
        s = x.sum()
        return x * 2 if -1 < s < 1 else x
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def early_stopping_with_patience_state_outside():
    state = {"best": np.inf, "bad": 0}

    def f(x):
        return tt.sum(x * x)

    def post(res, args):
        v = float(res)
        if v < state["best"]:
            state["best"], state["bad"] = v, 0
        else:
            state["bad"] += 1
        return dict(state)
    return {"f": f, "args": lambda i: (R(i, 3),), "post": post}


# ----------------------------------------------------------------------------- 16. dtype corners
# and more local NumPy buffers


@case()
def bool_plus_bool_and_invert():
    def f(a, b):
        return a + b, a * b, ~a, a ^ b, a.astype(np.int8) - b
    return {"f": f, "args": lambda i: (R(i, 4) > 0, R(i, 4, seed=1) > 0)}


@case()
def bool_sum_mean_dtype():
    def f(a):
        return a.sum(), a.mean(), tt.sum(a), tt.mean(a)
    return {"f": f, "args": lambda i: (R(i, 5) > 0,)}


@case()
def int_division_by_zero():
    def f(a, b):
        return a // b, a % b
    return {"f": f, "args": lambda i: (np.arange(4), np.array([1, 0, 2, 0 if i % 2 else 3]))}


@case()
def int8_argument_then_int64():
    def f(a):
        return a * 100, a + a
    return {"f": f, "args": lambda i: (np.arange(4, dtype=np.int8 if i % 2 else np.int64) + i,)}


@case()
def float16_tt_functions():
    def f(x):
        return tt.exp(x), tt.tanh(x), tt.softmax(x, axis=-1), tt.logsumexp(x)
    return {"f": f, "args": lambda i: (R(i, 4, dtype=np.float16),)}


@case()
def float32_tensor_and_float64_array_ops():
    w = tt.tensor(R(0, 3, dtype=np.float32), requires_grad=True)

    def f(x):
        return tt.sum(w * x), w + x, tt.dot(w, x)
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: w}


@case()
def int_tensor_mean_and_float_mul():
    def f(a):
        t = tt.tensor(a)
        return tt.mean(t), t * 0.5, t / 2, t // 2
    return {"f": f, "args": lambda i: (np.arange(5) * (i + 1),)}


@case()
def complex_tensor_grad_free_ops():
    def f(z):
        return tt.abs(z), tt.angle(z), tt.real(z) + tt.imag(z), z * 1j
    return {"f": f, "args": lambda i: (R(i, 3) + 1j * R(i, 3, seed=1),)}


@case()
def uint_subtraction_wraps():
    def f(a, b):
        return a - b, tt.sub(a, b)
    return {"f": f, "args": lambda i: (np.array([1, 2, 3], dtype=np.uint16),
                                       np.array([2, 2, 2], dtype=np.uint16) * i)}


@case()
def datetime_like_int64_big_values():
    def f(a):
        return a * 2, a // 3
    return {"f": f, "args": lambda i: (np.array([2 ** 62 + i, -(2 ** 62)], dtype=np.int64),)}


@case()
def empty_int_and_bool_arrays():
    def f(a, b):
        return a.sum(), b.any(), b.all(), a * 2
    return {"f": f, "args": lambda i: (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))}


@case()
def empty_matmul_and_mean():
    def f(a, b):
        return a @ b, tt.mean(a, axis=0)
    return {"f": f, "args": lambda i: (np.zeros((0, 3)), np.ones((3, 2)))}


@case()
def zero_d_tensor_ops_and_reshape():
    def f(s):
        t = tt.tensor(s)
        return t * 2, tt.reshape(t, (1, 1)), tt.stack([t, t]), t.shape
    return {"f": f, "args": lambda i: (np.array(0.5 * i),)}


@case()
def broadcasting_in_place_outside_tensor():
    w = tt.tensor(np.zeros((2, 3)))

    def f(x):
        with tt.no_grad():
            w.add_(x)
        return w * 1
    return {"f": f, "args": lambda i: (R(i, 3),), "state": lambda: w}


@case()
def inplace_ops_on_fresh_tensor_inside():
    def f(x):
        t = tt.zeros(3)
        t += x
        t *= 2
        t[0] = -1.0
        return t
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def local_buffer_fill_with_value():
    def f(x):
        y = np.empty(3)
        y.fill(float(x.sum()))
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def local_buffer_negative_out():
    def f(x):
        y = np.empty(3)
        np.negative(x, out=y)
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def local_buffer_slice_iadd():
    def f(x):
        y = np.zeros(5)
        y[1:4] += x
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def closure_copy_then_iadd():
    c = np.arange(3.0)

    def f(x):
        y = c.copy()
        y += x
        return y
    return {"f": f, "args": lambda i: (R(i, 3),)}


@case()
def local_buffer_iadd_arg_times_number():
    def f(x, a):
        y = np.zeros(3)
        y += a * x
        return y
    return {"f": f, "args": lambda i: (R(i, 3), 0.5 * i)}


@case()
def local_buffer_accumulate_in_loop_of_args():
    def f(xs):
        acc = np.zeros(3)
        for x in xs:
            acc += x
        return acc / len(xs)
    return {"f": f, "args": lambda i: ([R(i, 3, seed=k) for k in range(3)],)}


@case()
def local_buffer_iadd_tt_function_result():
    def f(x):
        acc = np.zeros(3)
        acc += tt.tanh(x)
        return acc
    return {"f": f, "args": lambda i: (R(i, 3),)}


# ----------------------------------------------------------------------------- 17. long runs:
# changes on the 3rd, 10th and 40th calls


@case(n=42, changes=(2, 9, 39))
def long_schedule_number_arg_and_config():
    cfg = {"wd": 0.0}

    def f(w, g, lr):
        return w - lr * (g + cfg["wd"] * w)

    def change(i):
        cfg["wd"] = 0.01 * i
    return {"f": f, "args": lambda i: (R(i, 3), R(i, 3, seed=1),
                                       0.5 * (1 + math.cos(math.pi * i / 42))), "change": change}


@case(n=42, changes=(2, 9, 39))
def long_training_loop_sgd_momentum():
    m = _mlp()
    opt = tt.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

    def f(x, y):
        opt.zero_grad()
        loss = tt.mean((m(x) - y) ** 2)
        loss.backward()
        opt.step()
        return loss

    def change(i):
        for g in opt.param_groups:
            g["lr"] = 0.01 * (i % 7 + 1)
    return {"f": f, "args": lambda i: (R(i, 4, 3), R(i, 4, 2, seed=1)), "change": change,
            "state": lambda: (_params(m), opt.state_dict())}


@case(n=42, changes=(2, 9, 39))
def long_value_branch_and_attribute():
    class Net:
        k = 1.0

    net = Net()

    def f(x):
        s = float(tt.sum(x))
        return x * net.k if s > 0 else x / net.k

    def change(i):
        net.k = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case(n=42, changes=(2, 9, 39))
def long_dropout_p_and_mode_changes():
    m = tt.nn.Sequential(tt.nn.Linear(3, 4, rng=0), tt.nn.Dropout(0.3))
    box = {"rng": None}

    def f(x):
        return m(x)

    def change(i):
        m.eval() if i == 39 else m.train()
        m[1].p = 0.1 * (i % 5)
    return {"f": f, "args": lambda i: (R(i, 2, 3),), "change": change,
            "state": lambda: (_params(m), box)}


@case(n=42, changes=(2, 9, 39))
def long_local_buffer_accumulate():
    def f(x):
        acc = np.zeros(3)
        acc += x
        return acc * 2

    return {"f": f, "args": lambda i: (R(i, 3),)}


# ----------------------------------------------------------------------------- 18. views of
# containers and attribute hooks


@case(xfail="a closed-over dict.values() view: a changed value in the dict is missed")
def dict_values_view_closed_over():
    d = {"a": 1.0}
    vals = d.values()

    def f(x):
        return [x * v for v in vals]

    def change(i):
        d["a"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def dict_items_view_closed_over():
    d = {"a": 1.0}
    items = d.items()

    def f(x):
        return {k: x * v for k, v in items}

    def change(i):
        d["b"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def dict_items_view_value_changed():
    d = {"a": 1.0}
    items = d.items()

    def f(x):
        return {k: x * v for k, v in items}

    def change(i):
        d["a"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def dict_keys_view_membership():
    d = {"a": 1.0}
    keys = d.keys()

    def f(x):
        return x * 2 if "b" in keys else x

    def change(i):
        d["b"] = 0.0
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def getattribute_override_config():
    store = {"k": 1.0}

    class C:
        def __getattribute__(self, name):
            if name == "k":
                return store["k"]
            return object.__getattribute__(self, name)

    c = C()

    def f(x):
        return x * c.k

    def change(i):
        store["k"] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def method_type_bound_to_namespace():
    ns = types.SimpleNamespace(k=1.0)
    run = types.MethodType(lambda self, x: x * self.k, ns)

    def f(x):
        return run(x)

    def change(i):
        ns.k = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def memoryview_config():
    buf = bytearray(np.array([1.0]).tobytes())
    mv = memoryview(buf).cast("d")

    def f(x):
        return x * mv[0]

    def change(i):
        mv[0] = float(i)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def range_object_rebound():
    box = types.SimpleNamespace(r=range(2))

    def f(x):
        return sum(x * k for k in box.r)

    def change(i):
        box.r = range(i % 4)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def slice_object_config():
    box = {"s": slice(0, 2)}

    def f(x):
        return x[box["s"]] * 2

    def change(i):
        box["s"] = slice(1, 3)
    return {"f": f, "args": lambda i: (R(i, 4),), "change": change}


@case()
def ellipsis_and_none_index_config():
    box = {"idx": (Ellipsis, None)}

    def f(x):
        return x[box["idx"]] * 2

    def change(i):
        box["idx"] = (None, Ellipsis)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def numpy_dtype_object_config():
    box = {"dt": np.float32}

    def f(x):
        return x.astype(box["dt"]) * 2

    def change(i):
        box["dt"] = np.float64 if i == 2 else np.float16
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def numpy_dtype_instance_config():
    box = {"dt": np.dtype("float32")}

    def f(x):
        return tt.astype(x, box["dt"]) * 2

    def change(i):
        box["dt"] = np.dtype("float64") if i == 2 else np.dtype("float16")
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def tuple_shape_config():
    box = {"shape": (3, 1)}

    def f(x):
        return tt.reshape(x, box["shape"]) * 2

    def change(i):
        box["shape"] = (1, 3)
    return {"f": f, "args": lambda i: (R(i, 3),), "change": change}


@case()
def axis_config_in_module_attr():
    class Red:
        axis = 0

    def f(x):
        return tt.sum(x, axis=Red.axis)

    def change(i):
        Red.axis = 1 if i == 2 else -1
    return {"f": f, "args": lambda i: (R(i, 2, 3),), "change": change}


# ----------------------------------------------------------------------------- the tests


# fixed since the round was written (their xfail markers dropped): each now equal to eager
FIXED = {"dict_values_view_closed_over", "metaclass_attribute", "enum_member_custom_attribute",
         "enum_member_mutable_value", "ctypes_double_config", "object_array_config"}


def _param(name):
    build, n, changes, xfail, kw = CASES[name]
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail and name not in FIXED else []
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", [_param(k) for k in CASES])
def test_compile_matches_eager(name):
    build, n, changes, xfail, kw = CASES[name]
    _run(build, n=n, changes=changes, compile_kw=kw or None)


def test_enough_cases():
    assert len(CASES) >= 150
