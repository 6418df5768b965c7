"""tt.compile, the fifth fresh user's round (issue 29): transforms with value-dependent use,
nested containers, kwargs, aliasing and layouts, in-place on intermediates, hooks, exceptions,
dynamic reads (``globals()[...]``, ``__getattr__``, properties, lru_cache) and odd arguments.

Every case must be equal to eager (bit for bit, via matrix_harness) or refused naming a fix.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import types
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tests.compile.matrix_harness import Case, UserError, classify

nn = tt.nn
F = tt.nn.functional
CASES = []


def case(n=6, k=3, cls=4):
    def deco(build):
        CASES.append(Case(build.__name__, cls, build, "either", n, k))
        return build
    return deco


def _x(i, shape=(3,), seed=0, sign=1.0):
    return sign * np.random.default_rng(seed + i).standard_normal(shape)


def _sg(i, k):
    return -1.0 if i + 1 >= k else 1.0


# ------------------------------------------------------------ transforms inside, used by value
@case()
def grad_in_if(C, k):
    @C
    def f(x):
        g = tt.grad(lambda z: (z ** 3).sum())(x)
        return g * 2 if float(g.sum()) > 5 else g - 1
    return lambda i: f(np.full(3, 2.0 if i + 1 < k else 0.1))


@case()
def value_and_grad_has_aux_python_values(C, k):
    def loss(z):
        s = tt.sum(z * z)
        d = s.detach()
        return s, {"n": int(z.shape[0]), "pos": bool(float(d) > 9), "m": float(d)}

    @C
    def f(x):
        (v, aux), g = tt.value_and_grad(loss, has_aux=True)(x)
        return v, g, aux
    return lambda i: f(_x(i) * _sg(i, k) + 3 * _sg(i, k))


@case()
def has_aux_value_steers_branch(C, k):
    def loss(z):
        return tt.sum(tt.tanh(z)), int(tt.argmax(z))

    @C
    def f(x):
        g, idx = tt.grad(loss, has_aux=True)(x)
        return g * idx if idx > 0 else g + 10
    return lambda i: f(np.array([0.0, 1.0, 0.5]) if i + 1 < k else np.array([2.0, 1.0, 0.5]))


@case(n=5)
def grad_norm_while_loop(C, k):
    @C
    def f(x):
        g = tt.grad(lambda z: tt.sum(z ** 4))(x)
        steps = 0
        while float(tt.sum(g * g)) > 1.0:
            g = g / 2
            steps += 1
        return g, steps
    return lambda i: f(np.full(2, 0.5 + i))


@case()
def jvp_tangent_branch(C, k):
    @C
    def f(x, v):
        y, t = tt.jvp(lambda z: tt.sin(z) * z, (x,), (v,))
        return y + t if bool((t > 0).all()) else y - t
    return lambda i: f(_x(i), np.ones(3) * _sg(i, k))


@case()
def vjp_inside_branch_on_output(C, k):
    @C
    def f(x):
        out, back = tt.vjp(lambda z: tt.exp(z) - 2.0, x)
        (ct,) = back(tt.ones_like(out))
        return ct * 2 if float(tt.max(out)) > 0 else ct
    return lambda i: f(_x(i) + (2 if i + 1 >= k else -3))


@case()
def jacobian_trace_branch(C, k):
    @C
    def f(x):
        J = tt.jacobian(lambda z: tt.tanh(z) * _sg(i_box[0], k))(x)
        return J.sum() if float(tt.trace(J)) > 0 else -J
    i_box = [0]

    def step(i):
        i_box[0] = i
        return f(_x(i))
    return step


@case()
def hessian_all_branch(C, k):
    @C
    def f(x):
        H = tt.hessian(lambda z: tt.sum(z ** 4))(x)
        return H if bool((tt.diagonal(H) > 1).all()) else -H
    return lambda i: f(np.full(3, 1.0 if i + 1 < k else 0.1))


@case()
def hvp_inside_branch(C, k):
    @C
    def f(x, v):
        hv = tt.hvp(lambda z: tt.sum(tt.sin(z)), (x,), (v,))
        return hv if float(tt.sum(hv)) < 0 else hv * 3
    return lambda i: f(np.full(3, 0.5) * _sg(i, k), np.ones(3))


@case()
def vmap_inside_branch(C, k):
    @C
    def f(x):
        r = tt.vmap(lambda row: tt.sum(row * row))(x)
        return r if float(tt.max(r)) < 4 else tt.sqrt(r)
    return lambda i: f(np.full((2, 3), 0.5 if i + 1 < k else 2.0))


@case()
def vmap_of_grad_inside(C, k):
    @C
    def f(x):
        g = tt.vmap(tt.grad(lambda r: tt.sum(tt.tanh(r) * r)))(x)
        return g if int(tt.argmax(tt.sum(g, axis=1))) == 0 else g * 2
    return lambda i: f(_x(i, (3, 2)))


# ------------------------------------------------------------ nested compiled functions
@case()
def nested_compiled_inner_guard_changes(C, k):
    cfg = {"s": 2.0}
    inner = C(lambda x: x * cfg["s"])
    outer = C(lambda x: inner(x) + 1)

    def step(i):
        if i + 1 == k:
            cfg["s"] = 5.0
        return outer(_x(0)), inner(_x(1))
    return step


@case()
def nested_compiled_inner_value_guard(C, k):
    @C
    def inner(x):
        return x * 2 if float(tt.sum(x)) > 0 else x * 3

    @C
    def outer(x):
        return inner(x) + inner(-x)
    return lambda i: outer(np.full(2, _sg(i, k)) + np.array([0.0, 0.1]))


# ------------------------------------------------------------ containers and signatures
@case()
def dict_of_lists_length_changes(C, k):
    @C
    def f(d):
        return sum(d["a"]) * d["b"]["c"]
    return lambda i: f({"a": [_x(0)] * (2 if i + 1 < k else 3), "b": {"c": _x(1)}})


P1 = collections.namedtuple("P1", "a b")
P2 = collections.namedtuple("P2", "b a")


@case()
def namedtuple_field_order_swapped(C, k):
    @C
    def f(p):
        return p.a * 2 - p.b
    return lambda i: f(P1(_x(0), _x(1)) if i + 1 < k else P2(_x(0), _x(1)))


@dataclasses.dataclass
class Cfg:
    w: np.ndarray
    scale: float


@case()
def dataclass_argument(C, k):
    @C
    def f(c, x):
        return x * c.w * c.scale
    return lambda i: f(Cfg(_x(i), 2.0 if i + 1 < k else 3.0), _x(5))


@case()
def kwargs_keys_change(C, k):
    @C
    def f(x, **kw):
        out = x
        for key, v in kw.items():
            out = out + v * (2.0 if key == "a" else 3.0)
        return out
    return lambda i: f(_x(0), a=_x(1)) if i + 1 < k else f(_x(0), b=_x(1))


@case()
def kwonly_default_then_passed(C, k):
    @C
    def f(x, *, scale=2.0):
        return x * scale
    return lambda i: f(_x(0)) if i + 1 < k else f(_x(0), scale=2.5)


@case()
def kwdefaults_rebound(C, k):
    def g(x, *, scale=2.0):
        return x * scale
    f = C(g)

    def step(i):
        if i + 1 == k:
            g.__kwdefaults__ = {"scale": 7.0}
        return f(_x(0))
    return step


@case()
def default_array_mutated_in_place(C, k):
    W0 = np.ones(3)

    @C
    def f(x, w=W0):
        return x * w

    def step(i):
        if i + 1 >= k:
            W0[:] += 1.0
        return f(_x(0))
    return step


@case()
def mutable_default_list_grows_outside(C, k):
    acc = []

    @C
    def f(x, acc=acc):
        return x * len(acc)

    def step(i):
        if i + 1 >= k:
            acc.append(1)
        return f(_x(0))
    return step


@case()
def dict_key_order_changes(C, k):
    @C
    def f(d):
        vals = list(d.values())
        return vals[0] * 2 - vals[1]
    return lambda i: f({"a": _x(0), "b": _x(1)} if i + 1 < k else {"b": _x(1), "a": _x(0)})


@case()
def list_vs_tuple_argument(C, k):
    @C
    def f(c):
        return c[0] * (2 if isinstance(c, list) else 3)
    return lambda i: f([_x(0)] if i + 1 < k else (_x(0),))


@case()
def bool_vs_int_argument(C, k):
    @C
    def f(x, s):
        return x + 1 if s is True else x + 2
    return lambda i: f(_x(0), True if i + 1 < k else 1)


@case()
def int_vs_float_argument_dtype(C, k):
    @C
    def f(x, s):
        return x * s
    return lambda i: f(np.arange(3), 2 if i + 1 < k else 2.0)


@case()
def npfloat64_vs_float_scalar_with_float32(C, k):
    @C
    def f(x, s):
        return x * s
    return lambda i: f(tt.tensor(np.ones(3, np.float32)), 0.5 if i + 1 < k else np.float64(0.5))


@case()
def npint64_vs_int_index(C, k):
    @C
    def f(x, j):
        return x[j] * 2
    return lambda i: f(_x(0, (4,)), 1 if i + 1 < k else np.int64(2 + i % 2))


@case()
def slice_argument(C, k):
    @C
    def f(x, s):
        return x[s] * 2
    return lambda i: f(_x(0, (5,)), slice(0, 2) if i + 1 < k else slice(1, 3))


@case()
def callable_argument(C, k):
    @C
    def f(x, act):
        return act(x) + 1
    return lambda i: f(_x(0), tt.tanh if i + 1 < k else tt.sigmoid)


@case()
def lambda_argument_new_closure_each_call(C, k):
    @C
    def f(x, act):
        return act(x)

    def step(i):
        s = 2.0 if i + 1 < k else 3.0
        return f(_x(0), lambda z: z * s)
    return step


@case()
def module_argument(C, k):
    m1, m2 = nn.Linear(3, 2, rng=0), nn.Linear(3, 2, rng=1)

    @C
    def f(m, x):
        return m(x)

    def step(i):
        with tt.no_grad():
            return f(m1 if i + 1 < k else m2, _x(0, (4, 3)))
    return step


@case()
def generator_argument_new_each_call(C, k):
    @C
    def f(x, g):
        return x + tt.randn(3, rng=g)
    return lambda i: f(_x(0), np.random.default_rng(i))


@case()
def generator_global_rebound_each_call(C, k):
    box = types.SimpleNamespace(g=np.random.default_rng(0))

    @C
    def f(x):
        return x + tt.randn(3, rng=box.g)

    def step(i):
        box.g = np.random.default_rng(100 + i)
        return f(_x(0))
    return step


# ------------------------------------------------------------ closures, code objects
@case()
def same_code_two_closures(C, k):
    def make(s):
        def f(x):
            return x * s
        return f
    a, b = C(make(2.0)), C(make(3.0))
    return lambda i: (a(_x(i)), b(_x(i)))


@case()
def same_function_compiled_twice_global_between(C, k):
    box = {"s": 2.0}

    def f(x):
        return x * box["s"]
    a = C(f)
    r0 = a(_x(0))
    box["s"] = 4.0
    b = C(f)
    return lambda i: (r0, a(_x(i)), b(_x(i)))


@case()
def function_with_swapped_code(C, k):
    def f(x):
        return x * 2

    def g(x):
        return x * 3
    cf = C(f)

    def step(i):
        if i + 1 == k:
            f.__code__ = g.__code__
        return cf(_x(0))
    return step


@case()
def lambdas_late_binding_list_replaced(C, k):
    box = {"fs": [lambda z, j=j: z * j for j in range(3)]}

    @C
    def f(x):
        return sum(g(x) for g in box["fs"])

    def step(i):
        if i + 1 == k:
            box["fs"] = [lambda z, j=j: z * (j + 1) for j in range(3)]
        return f(_x(0))
    return step


@case()
def genexpr_range_over_global_count(C, k):
    box = types.SimpleNamespace(n=2)

    @C
    def f(x):
        return sum(x[j] * (j + 1) for j in range(box.n))

    def step(i):
        if i + 1 == k:
            box.n = 3
        return f(_x(0, (4,)))
    return step


HELPER_SRC = """
SCALE = 2.0
def helper(x):
    global SCALE
    return x * SCALE
def dyn(x):
    return x * globals()["SCALE"]
def via_getattr(x, name):
    import sys
    return x * getattr(sys.modules[__name__], name)
"""


def _helper_module():
    mod = types.ModuleType("r5_helper_mod")
    exec(HELPER_SRC, mod.__dict__)
    return mod


@case()
def other_module_global_statement_read(C, k):
    mod = _helper_module()
    f = C(lambda x: mod.helper(x))

    def step(i):
        if i + 1 == k:
            mod.SCALE = 5.0
        return f(_x(0))
    return step


@case()
def other_module_globals_subscript(C, k):
    mod = _helper_module()
    f = C(lambda x: mod.dyn(x))

    def step(i):
        if i + 1 == k:
            mod.SCALE = 5.0
        return f(_x(0))
    return step


@case()
def own_globals_subscript(C, k):
    f = C(lambda x: x * globals()["R5_SCALE"])

    def step(i):
        globals()["R5_SCALE"] = 2.0 if i + 1 < k else 9.0
        return f(_x(0))
    return step


R5_SCALE = 2.0


@case()
def getattr_by_computed_name(C, k):
    box = types.SimpleNamespace(scale_a=2.0, scale_b=3.0, which="a")

    @C
    def f(x):
        return x * getattr(box, "scale_" + "a")

    def step(i):
        if i + 1 == k:
            box.scale_a = 11.0
        return f(_x(0))
    return step


@case()
def vars_dict_read(C, k):
    box = types.SimpleNamespace(s=2.0)

    @C
    def f(x):
        return x * vars(box)["s"]

    def step(i):
        if i + 1 == k:
            box.s = 6.0
        return f(_x(0))
    return step


# ------------------------------------------------------------ caches, properties, configs
@case()
def lru_cache_cleared_after_rerecord(C, k):
    box = types.SimpleNamespace(g=2.0)

    @functools.cache
    def coef(n):
        return n * box.g

    @C
    def f(x):
        return x * coef(3)

    def step(i):
        if i == 1:
            box.g = 4.0  # eager: still cached 6.0
        if i + 1 == k + 1:
            coef.cache_clear()  # eager: 12.0 from now on
        return f(_x(0))
    return step


class _ClassCache:
    table = {}

    def get(self, n):
        if n not in _ClassCache.table:
            _ClassCache.table[n] = float(n) * 1.5
        return _ClassCache.table[n]


@case()
def class_level_cache_filled_outside(C, k):
    _ClassCache.table = {}
    h = _ClassCache()
    h.get(3)

    @C
    def f(x):
        return x * h.get(3)

    def step(i):
        if i + 1 == k:
            _ClassCache.table[3] = 100.0
        return f(_x(0))
    return step


class _Counter:
    def __init__(self):
        self.n = 0

    @property
    def tick(self):
        self.n += 1
        return float(self.n)


@case()
def property_with_side_effect(C, k):
    c = _Counter()
    f = C(lambda x: x * c.tick)
    return lambda i: (f(_x(0)), c.n)


class _DictCfg:
    def __init__(self, **kw):
        object.__setattr__(self, "_d", dict(kw))

    def __getattr__(self, name):
        try:
            return self._d[name]
        except KeyError:
            raise AttributeError(name) from None


@case()
def getattr_backed_config(C, k):
    cfg = _DictCfg(scale=2.0)
    f = C(lambda x: x * cfg.scale)

    def step(i):
        if i + 1 == k:
            cfg._d["scale"] = 8.0
        return f(_x(0))
    return step


class _Mode(enum.Enum):
    A = 1
    B = 2


@case()
def enum_member_global(C, k):
    box = types.SimpleNamespace(mode=_Mode.A)

    @C
    def f(x):
        return x * 2 if box.mode is _Mode.A else x * 3

    def step(i):
        if i + 1 == k:
            box.mode = _Mode.B
        return f(_x(0))
    return step


class _Holder:
    def __init__(self):
        self.inner = types.SimpleNamespace(deep=types.SimpleNamespace(v=2.0))


@case()
def deep_attribute_chain(C, k):
    h = _Holder()
    f = C(lambda x: x * h.inner.deep.v)

    def step(i):
        if i + 1 == k:
            h.inner.deep.v = 4.0
        return f(_x(0))
    return step


@case()
def nested_dict_in_closure(C, k):
    cfg = {"a": {"b": [1.0, 2.0]}}
    f = C(lambda x: x * cfg["a"]["b"][1])

    def step(i):
        if i + 1 == k:
            cfg["a"]["b"][1] = 9.0
        return f(_x(0))
    return step


@case()
def tensor_in_list_replaced(C, k):
    ws = [tt.tensor(np.ones(3))]
    f = C(lambda x: x * ws[0])

    def step(i):
        if i + 1 == k:
            ws[0] = tt.tensor(np.full(3, 3.0))
        with tt.no_grad():
            return f(_x(0))
    return step


@case()
def tensor_requires_grad_flag_read(C, k):
    w = tt.tensor(np.ones(3))
    f = C(lambda x: x * 2 if w.requires_grad else x * 3)

    def step(i):
        if i + 1 == k:
            w.requires_grad_(True)
        with tt.no_grad():
            return f(_x(0))
    return step


@case()
def tensor_grad_attribute_read(C, k):
    w = tt.tensor(np.ones(3))
    w.grad = np.zeros(3)
    f = C(lambda x: x + w.grad)

    def step(i):
        w.grad = np.full(3, float(i))
        with tt.no_grad():
            return f(_x(0))
    return step


# ------------------------------------------------------------ numbers, dtypes, shapes, layouts
@case()
def int32_overflow(C, k):
    f = C(lambda x: x * 100000 + 7)
    return lambda i: f(np.array([1, 30000 + i, 50000], np.int32))


@case()
def big_python_int_argument(C, k):
    f = C(lambda x, n: x * n)
    return lambda i: f(np.ones(2), 2 ** 62 if i + 1 < k else 2 ** 64 + 1)


@case(n=6)
def float32_float64_alternating(C, k):
    f = C(lambda x: x * 0.1 + tt.sum(x))
    return lambda i: f(_x(i).astype(np.float32 if i % 2 else np.float64))


@case()
def zero_size_then_nonzero(C, k):
    f = C(lambda x: tt.sum(x, axis=0) * 2 + 1)
    return lambda i: f(np.zeros((0, 3)) if i % 2 == 0 else _x(i, (2, 3)))


@case()
def broadcast_31_vs_3(C, k):
    f = C(lambda x, y: x + y)
    return lambda i: f(_x(0, (3, 1)) if i + 1 < k else _x(0, (3,)), _x(1, (3,)))


@case()
def fortran_and_c_order_reshape(C, k):
    f = C(lambda x: tt.reshape(x, (-1,)) * 2)

    def step(i):
        a = _x(0, (3, 4))
        return f(np.asfortranarray(a) if i % 2 else a)
    return step


@case()
def negative_strides_and_transpose(C, k):
    f = C(lambda x: tt.reshape(x, (-1,)) + x[0, 0])

    def step(i):
        a = _x(0, (3, 4))
        return f(a[::-1] if i % 3 == 0 else (a.T.copy().T if i % 3 == 1 else a[:, ::-1]))
    return step


@case()
def aliasing_arguments(C, k):
    f = C(lambda a, b: a * 2 + b)

    def step(i):
        a = _x(0)
        return f(a, a) if i + 1 < k else f(a, _x(1))
    return step


@case()
def view_and_transpose_arguments(C, k):
    f = C(lambda a, b: tt.matmul(a, b))

    def step(i):
        a = _x(i, (3, 3))
        return f(a, a.T)
    return step


@case()
def len_and_shape_as_python_ints(C, k):
    f = C(lambda x: tt.sum(x) / len(x) + x.shape[0] + x[len(x) - 1])
    return lambda i: f(_x(0, (2 + i % 3,)))


@case()
def range_of_int_of_tensor(C, k):
    @C
    def f(x, n):
        for _ in range(int(n)):
            x = x * 2
        return x
    return lambda i: f(_x(0), np.array(1 + i % 3))


# ------------------------------------------------------------ in-place on intermediates
@case()
def inplace_on_intermediate(C, k):
    @C
    def f(x):
        h = tt.tensor(x) * 2
        h += 1
        h[0] = 0
        h.clamp_(0)
        return h
    return lambda i: f(_x(i))


@case()
def inplace_on_intermediate_under_grad(C, k):
    w = tt.tensor(_x(9), requires_grad=True)

    @C
    def f(x):
        h = x * w
        h.mul_(2)
        h.add_(1)
        return tt.sum(tt.tanh(h))

    def step(i):
        w.grad = None
        loss = f(_x(i))
        loss.backward()
        return loss, w
    return step


@case()
def inplace_in_grad_transform(C, k):
    @C
    def f(x):
        def loss(z):
            h = z * 3
            h.clamp_(-1, 1)
            return tt.sum(h * z)
        return tt.grad(loss)(x)
    return lambda i: f(_x(i))


@case()
def where_and_maximum_masks(C, k):
    f = C(lambda x: tt.where(x > 0, x, 0.1 * x) + tt.maximum(x, 0.5))
    return lambda i: f(_x(i, (5,)))


# ------------------------------------------------------------ randomness
@case(n=6)
def manual_seed_outside_dropout_inside(C, k):
    f = C(lambda x: F.dropout(x, 0.5))

    def step(i):
        tt.manual_seed(i % 2)
        return f(np.ones(8))
    return step


@case(n=6)
def manual_seed_inside_f(C, k):
    @C
    def f(x):
        tt.manual_seed(7)
        return F.dropout(x, 0.5)
    return lambda i: f(np.ones(8))


# ------------------------------------------------------------ grad modes, tape features
@case()
def no_grad_block_inside(C, k):
    w = tt.tensor(_x(7), requires_grad=True)

    @C
    def f(x):
        with tt.no_grad():
            h = x * w
        return tt.sum(h * w)

    def step(i):
        w.grad = None
        loss = f(_x(i))
        loss.backward()
        return loss, w
    return step


@case()
def enable_grad_inside_under_outer_no_grad(C, k):
    w = tt.tensor(_x(7), requires_grad=True)

    @C
    def f(x):
        with tt.enable_grad():
            y = tt.sum(x * w)
        return y

    def step(i):
        with tt.no_grad():
            y = f(_x(i))
        return y, getattr(y, "requires_grad", False)
    return step


@case()
def requires_grad_inside(C, k):
    @C
    def f(x):
        t = tt.tensor(np.ones(3)).requires_grad_()
        return tt.grad(lambda z: tt.sum(z * x))(t)
    return lambda i: f(_x(i))


@case()
def retain_grad_inside(C, k):
    w = tt.tensor(_x(3), requires_grad=True)

    @C
    def f(x):
        h = x * w
        h.retain_grad()
        return tt.sum(h * h), h

    def step(i):
        w.grad = None
        loss, h = f(_x(i))
        loss.backward()
        return loss, w, h
    return step


@case()
def hook_on_intermediate_inside(C, k):
    w = tt.tensor(_x(3), requires_grad=True)

    @C
    def f(x):
        h = x * w
        h.register_hook(lambda g: g * 2)
        return tt.sum(h * h)

    def step(i):
        w.grad = None
        loss = f(_x(i))
        loss.backward()
        return loss, w
    return step


@case()
def hook_on_parameter_inside(C, k):
    w = tt.tensor(_x(3), requires_grad=True)

    @C
    def f(x):
        w.register_hook(lambda g: g * 2)
        return tt.sum(x * w)

    def step(i):
        w.grad = None
        loss = f(_x(i))
        loss.backward()
        return loss, w
    return step


@case()
def argument_tensor_requires_grad_toggled(C, k):
    @C
    def f(t):
        return tt.sum(t * t)

    def step(i):
        t = tt.tensor(_x(i), requires_grad=i + 1 >= k)
        y = f(t)
        if getattr(y, "requires_grad", False):
            y.backward()
        return y, t
    return step


# ------------------------------------------------------------ exceptions, warnings, prints
@case()
def try_except_value_error_inside(C, k):
    @C
    def f(x):
        try:
            if float(tt.sum(x)) < 0:
                raise ValueError("neg")
            return x * 2
        except ValueError:
            return -x
    return lambda i: f(np.ones(3) * _sg(i, k))


@case()
def try_except_linalg_error_singular(C, k):
    @C
    def f(a):
        try:
            return tt.linalg.inv(a)
        except np.linalg.LinAlgError:
            return a * 0
    return lambda i: f(np.eye(2) * (2.0 if i + 1 < k else 0.0))


@case()
def user_error_raised_on_value(C, k):
    @C
    def f(x):
        if bool((x < 0).any()):
            raise UserError("negative")
        return tt.sqrt(x)
    return lambda i: f(np.abs(_x(i)) * (_sg(i, k) if i + 1 == k else 1))


@case()
def warnings_warn_inside_counted(C, k):
    @C
    def f(x):
        if float(tt.min(x)) < 0:
            warnings.warn("negative input", UserWarning, stacklevel=1)
        return x * 2

    def step(i):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = f(np.full(3, -1.0))
        return r, len([m for m in w if "negative input" in str(m.message)])
    return step


@case()
def print_inside_numbers_only(C, k):
    @C
    def f(x):
        print("value", float(tt.sum(x)) > 0)
        return x * 2
    return lambda i: f(_x(0) * _sg(i, k))


# ------------------------------------------------------------ generators
@case()
def compile_generator_function(C, k):
    @C
    def f(x):
        for j in range(3):
            yield x * j
    return lambda i: [np.asarray(v) for v in f(_x(i))]


@case()
def function_returning_generator(C, k):
    @C
    def f(x):
        return (x * j for j in range(3))
    return lambda i: [np.asarray(v) for v in f(_x(i))]


@case()
def returns_python_values_from_tensor(C, k):
    @C
    def f(x):
        return x * 2, float(tt.sum(x)), int(tt.argmax(x)), x.shape
    return lambda i: f(_x(i))


@case()
def recursion_depth_from_value(C, k):
    def rec(x, d):
        return x if d == 0 else rec(tt.tanh(x) + 1, d - 1)

    @C
    def f(x, n):
        return rec(x, int(tt.sum(n)))
    return lambda i: f(_x(0), np.array([1.0, float(i % 3)]))


@case()
def functools_partial_rebound_args(C, k):
    def base(x, s):
        return x * s
    p = functools.partial(base, s=2.0)
    f = C(lambda x: p(x))

    def step(i):
        nonlocal p
        if i + 1 == k:
            p = functools.partial(base, s=4.0)
        return f(_x(0))
    return step


@case()
def closure_cell_contents_set(C, k):
    def make():
        s = 2.0

        def g(x):
            return x * s
        return g
    g = make()
    f = C(g)

    def step(i):
        if i + 1 == k:
            g.__closure__[0].cell_contents = 3.0
        return f(_x(0))
    return step


@dataclasses.dataclass
class _DCModel:
    scale: float

    def apply(self, x):
        return x * self.scale


@case()
def bound_method_of_unhashable_dataclass(C, k):
    m = _DCModel(2.0)
    f = C(m.apply)

    def step(i):
        if i + 1 == k:
            m.scale = 5.0
        return f(_x(0))
    return step


@case()
def closed_over_unhashable_dataclass_field(C, k):
    m = _DCModel(2.0)
    f = C(lambda x: x * m.scale)

    def step(i):
        if i + 1 == k:
            m.scale = 5.0
        return f(_x(0))
    return step


@case()
def closed_over_npint64_vs_int_dtype(C, k):
    box = types.SimpleNamespace(n=2)
    f = C(lambda x: x * box.n)

    def step(i):
        if i + 1 == k:
            box.n = np.int64(2)
        return f(tt.tensor(np.arange(3, dtype=np.int32)))
    return step


@case()
def closed_over_npfloat64_vs_float_dtype(C, k):
    box = types.SimpleNamespace(s=0.5)
    f = C(lambda x: x * box.s)

    def step(i):
        if i + 1 == k:
            box.s = np.float64(0.5)
        return f(tt.tensor(np.ones(3, np.float32)))
    return step


@case()
def hook_accumulates_eagerly_on_intermediate_of_param(C, k):
    w = tt.tensor(_x(3), requires_grad=True)
    hooks = []

    @C
    def f(x):
        return tt.sum(x * w)

    def step(i):
        w.grad = None
        if i + 1 == k:
            hooks.append(w.register_hook(lambda g: g * 3))
        loss = f(_x(i))
        loss.backward()
        return loss, w
    return step


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_round5(c):
    r = classify(c)
    assert r.outcome in ("equal", "refused"), f"{r.outcome}: {r.detail}"


def test_round5_has_50_cases():
    assert len(CASES) >= 50
