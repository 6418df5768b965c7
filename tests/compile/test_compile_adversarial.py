"""Adversarial compile-vs-eager cases for issue 29's contract (inputs, guards, refusals).

Written against the docstring of ``tt.compile`` only. Each case builds fresh state, runs ``n``
calls eagerly and ``n`` compiled (tests/compile/matrix_harness.py), and must be *equal* to eager
bit for bit or *refused* with a message naming the fix. The scripted change happens on call
``k`` (1-based; the step's ``i`` is 0-based, so the change is ``i + 1 >= k``).
Run as a script (``PYTHONPATH=. python tests/compile/test_compile_adversarial.py``) it prints each
case's class: equal, refused, differ-after-warning, silent-difference, crashed.
"""

import collections
import dataclasses
import functools
import itertools
import math
import os
import sys
import threading

import numpy as np
import pytest

import tinytensor as tt
import tinytensor.nn.functional as F
from tinytensor import nn

sys.path.insert(0, os.path.dirname(__file__))
import adv_helper_mod as H  # noqa: E402
import matrix_harness as mh  # noqa: E402

CASES = []
T = tt.tensor


def case(cls, k, n=None, want="equal"):
    def deco(build):
        CASES.append(mh.Case(build.__name__, cls, build, want, n or k + 2, k))
        return build

    return deco


def _x(i, shape=(4,), seed=0):
    return np.random.default_rng(seed + i).standard_normal(shape)


# ---------------------------------------------------------------- values read in unlisted ways


@case("unlisted-read", 3)
def iterate_tensor_elements(C, k):
    f = C(lambda x: x * sum(1.0 for v in x if v > 0))

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 2)
def builtin_max_of_tensor(C, k):
    f = C(lambda x: x * max(x))

    def step(i):
        return f(T(np.array([1.0, 5.0, 3.0]) if i + 1 < k else np.array([7.0, 5.0, 3.0])))

    return step


@case("unlisted-read", 10)
def builtin_min_of_tensor(C, k):
    f = C(lambda x: x - min(x))

    def step(i):
        return f(T(np.array([1.0, 5.0, 3.0]) + (np.array([5.0, 0, 0]) if i + 1 >= k else 0)))

    return step


@case("unlisted-read", 3)
def str_of_tensor_as_dict_key(C, k):
    table = {"1.0": 10.0, "2.0": 20.0}
    f = C(lambda x: x * table.get(str(x.sum()), 0.5))

    def step(i):
        return f(T(np.array([0.5, 0.5]) * (2.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 2)
def fstring_format_of_tensor(C, k):
    table = {"1.00": 10.0, "2.00": 20.0}
    f = C(lambda x: x * table.get(f"{x.sum().item():.2f}", 0.5))

    def step(i):
        return f(T(np.array([0.5, 0.5]) * (2.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def format_spec_on_tensor(C, k):
    table = {"1.00": 10.0, "2.00": 20.0}
    f = C(lambda x: x * table.get(format(x.sum(), ".2f"), 0.5))

    def step(i):
        return f(T(np.array([0.5, 0.5]) * (2.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 10)
def mask_tolist_count(C, k):
    f = C(lambda x: x * (x > 0).tolist().count(True))

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def mask_sum_numpy_scalar_in_range(C, k):
    def f(x):
        n = (x > 0).sum()
        acc = x
        for _ in range(n):
            acc = acc * 1.5
        return acc

    f = C(f)

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 2)
def np_asarray_mask_then_numpy(C, k):
    def f(x):
        m = np.asarray(x > 0)
        return x * float(np.count_nonzero(m))

    f = C(f)

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def compare_two_tensors_branch(C, k):
    f = C(lambda a, b: a - b if (a > b).all() else b - a)

    def step(i):
        a = np.array([3.0, 4.0])
        return f(T(a), T(np.array([1.0, 2.0]) * (5.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 10)
def argmax_indexes_python_list(C, k):
    weights = [10.0, 20.0, 30.0]
    f = C(lambda x: x * weights[x.argmax()])

    def step(i):
        return f(T(np.array([3.0, 1.0, 2.0]) if i + 1 < k else np.array([1.0, 2.0, 3.0])))

    return step


@case("unlisted-read", 3)
def argmax_as_python_slice_bound(C, k):
    f = C(lambda x: x[: int(x.argmax()) + 1].sum())

    def step(i):
        return f(T(np.array([3.0, 1.0, 2.0]) if i + 1 < k else np.array([1.0, 2.0, 3.0])))

    return step


@case("unlisted-read", 2)
def data_elementwise_python_loop(C, k):
    def f(x):
        s = 0.0
        for v in x.data:
            if v > 0:
                s += 1.0
        return x * s

    f = C(f)

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def data_index_scalar_branch(C, k):
    f = C(lambda x: x * 2 if x.data[0] > 0 else x * 3)

    def step(i):
        return f(T(np.array([1.0, 2.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 10)
def numpy_max_scalar_branch(C, k):
    f = C(lambda x: x * 2 if x.numpy().max() > 2 else x * 3)

    def step(i):
        return f(T(np.array([1.0, 2.0]) * (2.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def data_tobytes_as_key(C, k):
    seen = {np.array([1.0, 2.0]).tobytes(): 5.0}
    f = C(lambda x: x * seen.get(x.data.tobytes(), 1.0))

    def step(i):
        return f(T(np.array([1.0, 2.0]) * (2.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 2)
def np_allclose_on_data(C, k):
    f = C(lambda x: x * 2 if np.allclose(x.data, 0.0) else x * 3)

    def step(i):
        return f(T(np.zeros(2) if i + 1 < k else np.ones(2)))

    return step


@case("unlisted-read", 3)
def math_floor_of_float(C, k):
    f = C(lambda x: x * math.floor(float(x.sum())))

    def step(i):
        return f(T(np.array([0.7, 0.7]) + (1.0 if i + 1 >= k else 0.0)))

    return step


@case("unlisted-read", 2)
def negative_zero_float_guard(C, k):
    f = C(lambda x: x * math.atan2(float(x.sum()), -1.0))

    def step(i):
        return f(T(np.array([0.0, 0.0]) if i + 1 < k else np.array([-0.0, -0.0])))

    return step


@case("unlisted-read", 3)
def negative_zero_item_copysign(C, k):
    f = C(lambda x: x + math.copysign(1.0, x[0].item()))

    def step(i):
        return f(T(np.array([0.0, 1.0]) if i + 1 < k else np.array([-0.0, 1.0])))

    return step


@case("unlisted-read", 3)
def nan_float_guard(C, k):
    f = C(lambda x: x * (0.0 if math.isnan(float(x.sum())) else 1.0))

    def step(i):
        return f(T(np.array([1.0, 2.0]) if i + 1 < k else np.array([np.nan, 2.0])))

    return step


@case("unlisted-read", 10)
def tolist_nested_structure(C, k):
    f = C(lambda x: x * len([r for r in x.tolist() if r[0] > 0]))

    def step(i):
        x = np.array([[1.0, 2.0], [3.0, 4.0]])
        return f(T(x * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def python_sum_of_list_of_tensors(C, k):
    f = C(lambda xs: sum(xs) * 2)

    def step(i):
        return f([T(np.ones(2) * j) for j in range(3 + (i + 1 >= k))])

    return step


@case("unlisted-read", 2)
def bool_tensor_in_python_and(C, k):
    f = C(lambda x: x * 2 if (x.sum() > 0) and (x.max() < 10) else x)

    def step(i):
        return f(T(np.array([1.0, 2.0]) * (20.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def tensor_in_python_list_membership(C, k):
    f = C(lambda x: x * (2.0 if 3.0 in x.tolist() else 1.0))

    def step(i):
        return f(T(np.array([3.0, 1.0]) if i + 1 < k else np.array([2.0, 1.0])))

    return step


@case("unlisted-read", 3)
def sorted_python_of_tensor(C, k):
    f = C(lambda x: x * float(sorted(x.tolist())[1]))

    def step(i):
        return f(T(np.array([3.0, 1.0, 2.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 2)
def round_builtin_of_tensor_item(C, k):
    f = C(lambda x: x * round(x.sum().item()))

    def step(i):
        return f(T(np.array([0.3, 0.3]) * (3.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def mask_any_via_numpy_function(C, k):
    f = C(lambda x: x * 2 if np.any(x > 1) else x)

    def step(i):
        return f(T(np.array([0.5, 0.2]) * (5.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def mask_indexing_python_list(C, k):
    names = ["a", "b", "c"]
    table = {"a": 1.0, "b": 2.0, "c": 3.0}

    def f(x):
        m = (x > 0).tolist()
        return x * sum(table[n] for n, keep in zip(names, m) if keep)

    f = C(f)

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 2)
def hash_of_item_into_list(C, k):
    buckets = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    f = C(lambda x: x * buckets[int(x.sum().item() * 10) % 7])

    def step(i):
        return f(T(np.array([0.1, 0.2]) + (0.1 if i + 1 >= k else 0.0)))

    return step


# ------------------------------------------------------------------ closed-over Python state


@case("closure-state", 3)
def closed_dict_tensor_replaced(C, k):
    d = {"w": T(np.array([1.0, 2.0]))}
    f = C(lambda x: x * d["w"])

    def step(i):
        if i + 1 == k:
            d["w"] = T(np.array([5.0, 6.0]))
        return f(T(np.ones(2)))

    return step


@case("closure-state", 10)
def closed_list_tensor_data_written(C, k):
    ws = [T(np.array([1.0, 2.0])), T(np.array([3.0, 4.0]))]
    f = C(lambda x: x * ws[0] + ws[1])

    def step(i):
        if i + 1 == k:
            ws[1].data[0] = 40.0
        return f(T(np.ones(2)))

    return step


@dataclasses.dataclass
class _Cfg:
    scale: float = 1.0
    w: object = None


@case("closure-state", 2)
def dataclass_attribute_to_tensor(C, k):
    cfg = _Cfg(2.0)
    f = C(lambda x: x * cfg.scale)

    def step(i):
        if i + 1 == k:
            cfg.scale = T(np.array([3.0, 4.0]))
        return f(T(np.ones(2)))

    return step


@dataclasses.dataclass
class _CfgNoCompare:
    scale: float = dataclasses.field(default=1.0, compare=False)


@case("closure-state", 3)
def dataclass_field_compare_false(C, k):
    cfg = _CfgNoCompare(2.0)
    f = C(lambda x: x * cfg.scale)

    def step(i):
        if i + 1 == k:
            cfg.scale = 5.0
        return f(T(np.ones(2)))

    return step


@dataclasses.dataclass
class _CfgArray:
    w: np.ndarray


@case("closure-state", 3)
def dataclass_with_array_field(C, k):
    cfg = _CfgArray(np.array([1.0, 2.0]))
    f = C(lambda x: x * cfg.w)

    def step(i):
        if i + 1 == k:
            cfg.w = np.array([7.0, 8.0])
        return f(T(np.ones(2)))

    return step


_NT = collections.namedtuple("_NT", "scale shift")


@case("closure-state", 10)
def namedtuple_replaced(C, k):
    box = [_NT(2.0, 1.0)]
    f = C(lambda x: x * box[0].scale + box[0].shift)

    def step(i):
        if i + 1 == k:
            box[0] = box[0]._replace(shift=-1.0)
        return f(T(np.ones(2)))

    return step


@case("closure-state", 2)
def global_of_helper_module_attribute(C, k):
    H.SCALE = 2.0
    f = C(lambda x: x * H.SCALE)

    def step(i):
        if i + 1 == k:
            H.SCALE = 3.0
        return f(T(np.ones(2)))

    return step


@case("closure-state", 3)
def global_read_by_helper_module_function(C, k):
    H.SCALE = 2.0
    f = C(lambda x: H.scaled(x))

    def step(i):
        if i + 1 == k:
            H.SCALE = 4.0
        return f(T(np.ones(2)))

    return step


@case("closure-state", 10)
def helper_module_dict_mutated(C, k):
    H.CONFIG["shift"] = 1.0
    f = C(H.shifted)

    def step(i):
        if i + 1 == k:
            H.CONFIG["shift"] = -5.0
        return f(T(np.ones(2)))

    return step


@case("closure-state", 3)
def helper_module_array_written_in_place(C, k):
    H.ARR[:] = [1.0, 2.0, 3.0]
    f = C(lambda x: x * H.ARR)

    def step(i):
        if i + 1 == k:
            H.ARR[1] = 20.0
        return f(T(np.ones(3)))

    return step


@case("closure-state", 3)
def lru_cached_helper_reads_global(C, k):
    H.SCALE = 2.0
    H.cached_coef.cache_clear()
    f = C(lambda x: x * H.cached_coef(3))

    def step(i):
        if i + 1 == k:
            H.SCALE = 5.0
            H.cached_coef.cache_clear()
        return f(T(np.ones(2)))

    return step


@case("closure-state", 2)
def helper_module_function_mutating_global(C, k):
    H.COUNT = 0
    f = C(lambda x: x * H.bump())

    def step(i):
        return f(T(np.ones(2)))

    return step


class _ClsTensor:
    w = T(np.array([1.0, 2.0]))


@case("closure-state", 3)
def class_level_tensor_rebound(C, k):
    _ClsTensor.w = T(np.array([1.0, 2.0]))
    obj = _ClsTensor()
    f = C(lambda x: x * obj.w)

    def step(i):
        if i + 1 == k:
            _ClsTensor.w = T(np.array([9.0, 9.0]))
        return f(T(np.ones(2)))

    return step


@case("closure-state", 2)
def python_iterator_closed_over(C, k):
    it = iter([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    f = C(lambda x: x * next(it))

    def step(i):
        return f(T(np.ones(2)))

    return step


@case("closure-state", 2)
def itertools_count_closed_over(C, k):
    counter = itertools.count(1)
    f = C(lambda x: x * next(counter))

    def step(i):
        return f(T(np.ones(2)))

    return step


@case("closure-state", 2)
def python_generator_closed_over(C, k):
    def gen():
        v = 1.0
        while True:
            yield v
            v *= 2

    g = gen()
    f = C(lambda x: x * next(g))

    def step(i):
        return f(T(np.ones(2)))

    return step


@case("closure-state", 10)
def nonlocal_read_written_by_sibling(C, k):
    n = 1.0

    def bump():
        nonlocal n
        n += 1.0

    def g(x):
        return x * n

    f = C(g)

    def step(i):
        if i + 1 >= k:
            bump()
        return f(T(np.ones(2)))

    return step


class _Obj:
    def __init__(self):
        self.scale = 2.0


@case("closure-state", 3)
def setattr_by_name(C, k):
    obj = _Obj()
    f = C(lambda x: x * obj.scale)

    def step(i):
        if i + 1 == k:
            setattr(obj, "scale", 7.0)  # noqa: B010
        return f(T(np.ones(2)))

    return step


@case("closure-state", 3)
def instance_dict_edit(C, k):
    obj = _Obj()
    f = C(lambda x: x * obj.scale)

    def step(i):
        if i + 1 == k:
            obj.__dict__["scale"] = 7.0
        return f(T(np.ones(2)))

    return step


class _WithClassDefault:
    scale = 1.0


@case("closure-state", 2)
def del_instance_attr_falls_back_to_class(C, k):
    obj = _WithClassDefault()
    obj.scale = 3.0
    f = C(lambda x: x * obj.scale)

    def step(i):
        if i + 1 == k:
            del obj.scale
        return f(T(np.ones(2)))

    return step


class _Prop:
    def __init__(self):
        self._s = 2.0

    @property
    def scale(self):
        return self._s * H.SCALE


@case("closure-state", 3)
def property_reads_other_module_global(C, k):
    H.SCALE = 2.0
    obj = _Prop()
    f = C(lambda x: x * obj.scale)

    def step(i):
        if i + 1 == k:
            H.SCALE = 10.0
        return f(T(np.ones(2)))

    return step


@case("closure-state", 10)
def os_environ_read(C, k):
    os.environ["TT_ADV_SCALE"] = "2.0"
    f = C(lambda x: x * float(os.environ["TT_ADV_SCALE"]))

    def step(i):
        if i + 1 == k:
            os.environ["TT_ADV_SCALE"] = "3.0"
        return f(T(np.ones(2)))

    return step


@case("closure-state", 3)
def closed_float_to_numpy_float32(C, k):
    s = [2.0]
    f = C(lambda x: x * s[0])

    def step(i):
        if i + 1 == k:
            s[0] = np.float32(2.0)
        return f(T(np.ones(2)))

    return step


@case("closure-state", 2)
def closed_python_float_to_numpy_float64_on_float32(C, k):
    s = 2.0

    def g(x):
        return x * s

    f = C(g)

    def step(i):
        nonlocal s
        if i + 1 == k:
            s = np.float64(2.0)
        return f(T(np.ones(2, np.float32)))

    return step


@case("closure-state", 3)
def closed_int_to_float_on_int_tensor(C, k):
    s = {"n": 2}
    f = C(lambda x: x * s["n"])

    def step(i):
        if i + 1 == k:
            s["n"] = 2.0
        return f(T(np.arange(3)))

    return step


@case("closure-state", 2)
def closed_negative_zero(C, k):
    s = [0.0]
    f = C(lambda x: x + math.copysign(1.0, s[0]))

    def step(i):
        if i + 1 == k:
            s[0] = -0.0
        return f(T(np.ones(2)))

    return step


@case("closure-state", 3)
def recursive_list_closed_over(C, k):
    cfg = [2.0]
    cfg.append(cfg)
    f = C(lambda x: x * cfg[0])

    def step(i):
        if i + 1 == k:
            cfg[0] = 3.0
        return f(T(np.ones(2)))

    return step


@case("closure-state", 3)
def function_code_swapped(C, k):
    def act(x):
        return x * 2

    def other(x):
        return x * 3

    f = C(lambda x: act(x))

    def step(i):
        if i + 1 == k:
            act.__code__ = other.__code__
        return f(T(np.ones(2)))

    return step


@case("closure-state", 10)
def instance_method_monkeypatched(C, k):
    class M:
        def act(self, x):
            return x * 2

    obj = M()
    f = C(lambda x: obj.act(x))

    def step(i):
        if i + 1 == k:
            obj.act = lambda x: x * 5
        return f(T(np.ones(2)))

    return step


@case("closure-state", 3)
def partial_keywords_mutated(C, k):
    def g(x, scale):
        return x * scale

    p = functools.partial(g, scale=2.0)
    f = C(lambda x: p(x))

    def step(i):
        if i + 1 == k:
            p.keywords["scale"] = 6.0
        return f(T(np.ones(2)))

    return step


@case("closure-state", 3)
def kwdefaults_changed(C, k):
    def g(x, *, scale=2.0):
        return x * scale

    f = C(lambda x: g(x))

    def step(i):
        if i + 1 == k:
            g.__kwdefaults__ = {"scale": 9.0}
        return f(T(np.ones(2)))

    return step


class _Slots:
    __slots__ = ("scale",)

    def __init__(self):
        self.scale = 2.0


@case("closure-state", 3)
def slots_object_attribute(C, k):
    obj = _Slots()
    f = C(lambda x: x * obj.scale)

    def step(i):
        if i + 1 == k:
            obj.scale = 4.0
        return f(T(np.ones(2)))

    return step


@case("closure-state", 2)
def getattr_dynamic_name(C, k):
    obj = _Obj()
    obj.other = 5.0
    which = ["scale"]
    f = C(lambda x: x * getattr(obj, which[0]))

    def step(i):
        if i + 1 == k:
            which[0] = "other"
        return f(T(np.ones(2)))

    return step


class _DynAttr:
    def __init__(self):
        self.store = {"scale": 2.0}

    def __getattr__(self, name):
        try:
            return self.__dict__["store"][name]
        except KeyError:
            raise AttributeError(name) from None


@case("closure-state", 3)
def dunder_getattr_backed_by_dict(C, k):
    obj = _DynAttr()
    f = C(lambda x: x * obj.scale)

    def step(i):
        if i + 1 == k:
            obj.store["scale"] = 8.0
        return f(T(np.ones(2)))

    return step


# --------------------------------------------------------------------- modules, hooks, modes


def _lin(seed=0, i=3, o=2):
    return nn.Linear(i, o, rng=seed, dtype=np.float64)


def _frozen(m):
    for p in m.parameters():
        p.requires_grad = False
    return m


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = _lin()
        self.scale = 2.0

    def forward(self, x):
        return self.lin(x) * self.scale


@case("modules", 3)
def module_dict_edit_bypasses_setattr(C, k):
    m = _frozen(_Scaled())
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.__dict__["scale"] = 5.0
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 10)
def forward_hook_reads_closure_list(C, k):
    m = _frozen(_lin())
    state = [1.0]
    m.register_forward_hook(lambda mod, inp, out: out * state[0])
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            state[0] = 3.0
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 3)
def forward_pre_hook_reads_helper_global(C, k):
    H.SCALE = 2.0
    m = _frozen(_lin())
    m.register_forward_pre_hook(lambda mod, inp: (inp[0] * H.SCALE,))
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            H.SCALE = 7.0
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 2)
def hook_removed_by_handle(C, k):
    m = _frozen(_lin())
    h = m.register_forward_hook(lambda mod, inp, out: out * 10.0)
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            h.remove()
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 3)
def forward_replaced_on_class(C, k):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = _lin()

        def forward(self, x):
            return self.lin(x)

    m = _frozen(M())
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            M.forward = lambda self, x: self.lin(x) * 4.0
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 10)
def weight_data_dtype_rebound(C, k):
    m = _frozen(_lin())
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.weight.data = m.weight.data.astype(np.float32)
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 3)
def weight_tied_between_calls(C, k):
    a, b = _frozen(_lin(0, 3, 3)), _frozen(_lin(1, 3, 3))
    f = C(lambda x: b(a(x)))

    def step(i):
        if i + 1 == k:
            b.weight = a.weight
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 3)
def module_apply_rewrites_weights(C, k):
    m = _frozen(nn.Sequential(_lin(0, 3, 3), nn.Tanh(), _lin(1, 3, 2)))

    def reinit(mod):
        if isinstance(mod, nn.Linear):
            mod.weight.data = np.full_like(mod.weight.data, 0.1)

    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.apply(reinit)
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 2)
def eval_inside_restored(C, k):
    m = nn.Sequential(_frozen(_lin(0, 3, 3)), nn.Dropout(0.5, rng=1))

    def g(x):
        was = m.training
        m.eval()
        y = m(x)
        m.train(was)
        return y

    f = C(g)

    def step(i):
        if i + 1 == k:
            m.eval()
        return f(T(np.ones((2, 3)))), m

    return step


@case("modules", 3)
def eval_inside_not_restored(C, k):
    m = nn.Sequential(_frozen(_lin(0, 3, 3)), nn.Dropout(0.5, rng=1))

    def g(x):
        m.eval()
        return m(x)

    f = C(g)

    def step(i):
        if i + 1 == k:
            m.train()
        return f(T(np.ones((2, 3)))), m.training

    return step


@case("modules", 10)
def requires_grad_toggled_between_calls(C, k):
    m = _frozen(_lin())
    f = C(lambda x: (m(x) ** 2).sum())

    def step(i):
        if i + 1 == k:
            m.weight.requires_grad_(True)
        out = f(T(np.ones((2, 3))))
        return out, m

    return step


@case("modules", 3)
def no_grad_alternating(C, k):
    m = _lin()
    f = C(lambda x: (m(x) ** 2).sum())

    def step(i):
        x = T(np.ones((2, 3)) * (i + 1))
        if (i + 1 >= k) and i % 2:
            with tt.no_grad():
                return f(x), m
        out = f(x)
        out.backward()
        return out, m

    return step


@case("modules", 40, n=42)
def batchnorm_train_40_calls_batch_change(C, k):
    bn = nn.BatchNorm1d(3, dtype=np.float64)
    _frozen(bn)
    f = C(lambda x: bn(x))

    def step(i):
        x = _x(i, (5 if i + 1 < k else 7, 3))
        return f(T(x)), bn

    return step


@case("modules", 10)
def batchnorm_momentum_none_cumulative(C, k):
    bn = nn.BatchNorm1d(3, momentum=None, dtype=np.float64)
    _frozen(bn)
    f = C(lambda x: bn(x))

    def step(i):
        if i + 1 == k:
            bn.eval()
        return f(T(_x(i, (5, 3)))), bn

    return step


@case("modules", 3)
def batchnorm_momentum_attribute_changed(C, k):
    bn = _frozen(nn.BatchNorm1d(3, dtype=np.float64))
    f = C(lambda x: bn(x))

    def step(i):
        if i + 1 == k:
            bn.momentum = 0.5
        return f(T(_x(i, (5, 3)))), bn

    return step


@case("modules", 3)
def batchnorm_running_mean_written_by_caller(C, k):
    bn = _frozen(nn.BatchNorm1d(3, dtype=np.float64))
    bn.eval()
    f = C(lambda x: bn(x))

    def step(i):
        if i + 1 == k:
            bn.running_mean.data[:] = 5.0
        return f(T(_x(i, (5, 3)))), bn

    return step


@case("modules", 2)
def dropout_p_zero_to_one(C, k):
    d = nn.Dropout(0.0, rng=3)
    f = C(lambda x: d(x))

    def step(i):
        if i + 1 == k:
            d.p = 1.0
        return f(T(np.ones((3, 4)))), d

    return step


@case("modules", 10)
def submodule_list_append(C, k):
    seq = nn.Sequential(_frozen(_lin(0, 3, 3)))
    f = C(lambda x: seq(x))

    def step(i):
        if i + 1 == k:
            seq.append(_frozen(_lin(1, 3, 3))) if hasattr(seq, "append") else seq.add_module(
                "1", _frozen(_lin(1, 3, 3))
            )
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 3)
def module_list_iteration_count_from_closure(C, k):
    layers = nn.ModuleList([_frozen(_lin(j, 3, 3)) for j in range(4)])
    depth = [2]

    def g(x):
        for layer in layers[: depth[0]]:
            x = tt.tanh(layer(x))
        return x

    f = C(g)

    def step(i):
        if i + 1 == k:
            depth[0] = 4
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 3)
def module_attribute_float_to_tensor(C, k):
    m = _frozen(_Scaled())
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.scale = T(np.array([1.0, 3.0]))
        return f(T(np.ones((2, 3))))

    return step


@case("modules", 2)
def module_buffer_replaced_via_register_buffer(C, k):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("offset", T(np.array([1.0, 2.0])))

        def forward(self, x):
            return x + self.offset

    m = M()
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.register_buffer("offset", T(np.array([10.0, 20.0])))
        return f(T(np.ones(2)))

    return step


# ------------------------------------------------------------------------ arguments and keys


@case("arguments", 3)
def int_then_float_number_argument_on_int_tensor(C, k):
    f = C(lambda x, n: x * n)

    def step(i):
        return f(T(np.arange(3)), 2.0 if i + 1 >= k else 2)

    return step


@case("arguments", 2)
def bool_then_int_number_argument(C, k):
    f = C(lambda x, n: x + (n is True))

    def step(i):
        return f(T(np.arange(3.0)), 1 if i + 1 >= k else True)

    return step


@case("arguments", 3)
def python_float_then_numpy_float64_on_float32(C, k):
    f = C(lambda x, s: x * s)

    def step(i):
        return f(T(np.ones(3, np.float32)), np.float64(2.0) if i + 1 >= k else 2.0)

    return step


@case("arguments", 10)
def numpy_float32_then_float64_scalar(C, k):
    f = C(lambda x, s: x * s)

    def step(i):
        return f(T(np.ones(3, np.float32)), np.float64(0.1) if i + 1 >= k else np.float32(0.1))

    return step


@case("arguments", 2)
def negative_zero_number_argument(C, k):
    f = C(lambda x, s: x / s)

    def step(i):
        with np.errstate(divide="ignore"):
            return f(T(np.ones(2)), -0.0 if i + 1 >= k else 0.0)

    return step


@case("arguments", 3)
def dict_argument_key_order(C, k):
    f = C(lambda d: sum(d.values()) * 1.0)

    def step(i):
        a, b, c = T(np.array([1e16])), T(np.array([1.0])), T(np.array([-1e16]))
        if i + 1 >= k:
            return f({"b": b, "a": a, "c": c})
        return f({"a": a, "b": b, "c": c})

    return step


@case("arguments", 2)
def dict_argument_key_order_returned(C, k):
    f = C(lambda d: list(d.keys()).index("a") * d["a"])

    def step(i):
        a, b = T(np.ones(2)), T(np.ones(2))
        return f({"b": b, "a": a} if i + 1 >= k else {"a": a, "b": b})

    return step


@case("arguments", 3)
def tuple_then_list_argument(C, k):
    f = C(lambda p: p[0] * (2.0 if isinstance(p, list) else 3.0))

    def step(i):
        a = T(np.ones(2))
        return f([a] if i + 1 >= k else (a,))

    return step


@case("arguments", 3)
def same_tensor_passed_twice_identity(C, k):
    f = C(lambda a, b: a * 2 if a is b else a + b)

    def step(i):
        a, b = T(np.ones(2)), T(np.ones(2) * 3)
        return f(a, a) if i + 1 >= k else f(a, b)

    return step


@case("arguments", 3)
def same_array_passed_twice_then_distinct(C, k):
    f = C(lambda a, b: a * b + a)

    def step(i):
        a, b = np.ones(3) * 2, np.ones(3) * 3
        return f(a, a) if i + 1 < k else f(a, b)

    return step


@case("arguments", 10)
def noncontiguous_view_argument(C, k):
    f = C(lambda a: tt.dot(a, a.T) + a.sum(axis=0)[None, :3])

    def step(i):
        base = _x(i, (6, 6))
        return f(base[::2, ::2] if i + 1 >= k else np.ascontiguousarray(base[::2, ::2]))

    return step


@case("arguments", 3)
def broadcast_to_readonly_argument(C, k):
    f = C(lambda a, b: tt.softmax(a * b))

    def step(i):
        b = np.arange(4.0)
        a = np.broadcast_to(np.arange(4.0)[:, None], (4, 4)) if i + 1 >= k else np.ones((4, 4))
        return f(a, b)

    return step


@case("arguments", 3)
def results_not_overwritten_by_later_calls(C, k):
    f = C(lambda a: tt.tanh(a) * 2)
    outs = []

    def step(i):
        outs.append(f(np.ones(3) * (i + 1)))
        return [np.array(o) for o in outs] + [outs[0]]

    return step


@case("arguments", 3)
def result_mutated_by_caller_then_next_call(C, k):
    f = C(lambda a: a * 1.0 + 0.0)
    keep = {}

    def step(i):
        r = f(np.ones(3))
        r_arr = r.data if isinstance(r, tt.Tensor) else r
        if i + 1 == k:
            r_arr[:] = 99.0
        keep[i] = r_arr
        return np.array(r_arr), keep[0]

    return step


@case("arguments", 3)
def argument_mutated_by_caller_between_calls(C, k):
    a = np.ones(3)
    f = C(lambda x: x * 2)

    def step(i):
        if i + 1 == k:
            a[1] = 5.0
        return f(a)

    return step


@case("arguments", 2)
def zero_d_then_one_d(C, k):
    f = C(lambda a: a * a.sum())

    def step(i):
        return f(np.array([3.0]) if i + 1 >= k else np.array(3.0))

    return step


@case("arguments", 3)
def empty_array_then_full(C, k):
    f = C(lambda a: a.sum() + (a > 0).all() * 1.0)

    def step(i):
        return f(np.ones(3) if i + 1 >= k else np.zeros(0))

    return step


@case("arguments", 10)
def int_then_float_dtype(C, k):
    f = C(lambda a: a / 2)

    def step(i):
        return f(np.arange(3.0) if i + 1 >= k else np.arange(3))

    return step


@case("arguments", 3)
def keyword_argument_default_omitted(C, k):
    def g(x, scale=2.0):
        return x * scale

    f = C(g)

    def step(i):
        return f(T(np.ones(2)), scale=3.0) if i + 1 >= k else f(T(np.ones(2)))

    return step


@case("arguments", 3)
def varargs_count_changes(C, k):
    f = C(lambda *xs: sum(xs[1:], xs[0]) * len(xs))

    def step(i):
        return f(*[T(np.ones(2)) for _ in range(2 + (i + 1 >= k))])

    return step


@case("arguments", 2)
def huge_python_int_argument(C, k):
    f = C(lambda x, n: x * float(n % 7))

    def step(i):
        return f(T(np.ones(2)), 2**70 + (3 if i + 1 >= k else 0))

    return step


@case("arguments", 3)
def string_argument_selects_activation(C, k):
    f = C(lambda x, act: getattr(tt, act)(x))

    def step(i):
        return f(T(np.array([-1.0, 2.0])), "relu" if i + 1 >= k else "tanh")

    return step


@case("arguments", 40, n=42)
def float_argument_changes_every_call(C, k):
    f = C(lambda x, lr: x - lr * x**2 if lr < 0.05 else x)

    def step(i):
        return f(T(np.ones(2)), 0.1 * math.cos(i / 10) ** 2 + (0.0 if i + 1 < k else 1.0))

    return step


@case("arguments", 10)
def int_argument_changes_every_call_used_in_range(C, k):
    def g(x, n):
        for _ in range(n):
            x = x * 1.1
        return x

    f = C(g)

    def step(i):
        return f(T(np.ones(2)), i % 11 + (5 if i + 1 >= k else 0))

    return step


# ----------------------------------------------------------- exceptions, composition, switches


def _outcome(fn, *a):
    try:
        return ("ok", fn(*a))
    except (ValueError, KeyError, IndexError, ZeroDivisionError, AssertionError) as e:
        return ("raised", type(e).__name__)


@case("exceptions", 2)
def raise_on_negative_value(C, k):
    def g(x):
        if (x < 0).any():
            raise ValueError("negative")
        return x * 2

    f = C(g)

    def step(i):
        return _outcome(f, T(np.array([1.0, 2.0]) * (-1.0 if (i + 1 >= k and i % 2) else 1.0)))

    return step


@case("exceptions", 3)
def keyerror_from_dict_keyed_by_int(C, k):
    table = {3: 1.5, 4: 2.5}
    f = C(lambda x: x * table[int(x.sum())])

    def step(i):
        return _outcome(f, T(np.array([1.0, 2.0]) + (5.0 if i + 1 == k else 0.0)))

    return step


@case("exceptions", 3)
def assert_inside_helper(C, k):
    def check(x):
        assert float(x.max()) < 10, "too large"
        return x

    f = C(lambda x: check(x) * 2)

    def step(i):
        return _outcome(f, T(np.array([1.0, 2.0]) * (20.0 if i + 1 == k else 1.0)))

    return step


@case("exceptions", 2)
def exception_then_eager_tape_still_works(C, k):
    def g(x):
        if float(x.sum()) > 5:
            raise ValueError("big")
        return x * 2

    f = C(g)

    def step(i):
        r = _outcome(f, T(np.ones(3) * (3.0 if i + 1 == k else 1.0)))
        w = tt.tensor(np.array([1.0, 2.0]), requires_grad=True)
        (w * w).sum().backward()
        return r, w.grad, tt.is_grad_enabled()

    return step


@case("exceptions", 3)
def exception_inside_no_grad_block(C, k):
    def g(x):
        with tt.no_grad():
            if float(x.sum()) > 5:
                raise ValueError("big")
        return x * 2

    f = C(g)

    def step(i):
        r = _outcome(f, T(np.ones(3) * (3.0 if i + 1 == k else 1.0)))
        return r, tt.is_grad_enabled()

    return step


@case("state-changes", 2)
def f_turns_grad_mode_off(C, k):
    def g(x):
        tt.set_grad_enabled(False)
        return x * 2

    f = C(g)

    def step(i):
        tt.set_grad_enabled(True)
        out = f(T(np.ones(2)))
        mode = tt.is_grad_enabled()
        tt.set_grad_enabled(True)
        return out, mode

    return step


@case("state-changes", 2)
def manual_seed_inside_f(C, k):
    def g(x):
        tt.manual_seed(7)
        return x + tt.randn(2)

    f = C(g)

    def step(i):
        out = f(T(np.ones(2)))
        return out, tt.randn(2)

    return step


@case("state-changes", 3)
def set_rng_state_inside_f_from_closure(C, k):
    tt.manual_seed(1)
    saved = [tt.get_rng_state()]

    def g(x):
        tt.set_rng_state(saved[0])
        return x + tt.randn(2)

    f = C(g)

    def step(i):
        if i + 1 == k:
            tt.manual_seed(99)
            saved[0] = tt.get_rng_state()
        return f(T(np.ones(2)))

    return step


@case("state-changes", 3)
def get_rng_state_read_inside_f(C, k):
    def g(x):
        s = tt.get_rng_state()
        return x * float(np.asarray(s).ravel()[-1] % 7)

    f = C(g)

    def step(i):
        tt.randn(1)
        return f(T(np.ones(2)))

    return step


@case("state-changes", 3)
def memo_dict_keyed_by_shape(C, k):
    memo = {}

    def g(x):
        if x.shape not in memo:
            memo[x.shape] = 2.0
        return x * memo[x.shape]

    f = C(g)

    def step(i):
        return f(T(np.ones(2 + (i + 1 >= k))))

    return step


@case("state-changes", 2)
def tensor_name_set_inside(C, k):
    w = T(np.ones(2))

    def g(x):
        w.name = "w"
        return x * w

    f = C(g)

    def step(i):
        return f(T(np.ones(2))), w.name

    return step


@case("state-changes", 3)
def data_inplace_write_on_argument(C, k):
    def g(x):
        x.data[0] = 0.0
        return x * 2

    f = C(g)

    def step(i):
        a = T(np.ones(2) * (i + 1))
        out = f(a)
        return out, a

    return step


@case("state-changes", 3)
def inplace_operator_on_closed_tensor(C, k):
    acc = T(np.zeros(2))

    def g(x):
        acc.data += x.data
        return acc * 1.0

    f = C(g)

    def step(i):
        return f(T(np.ones(2))), acc

    return step


@case("composition", 3)
def compiled_twice_same_function(C, k):
    s = [2.0]

    def g(x):
        return x * s[0]

    f1, f2 = C(g), C(g)

    def step(i):
        if i + 1 == k:
            s[0] = 3.0
        return f1(T(np.ones(2))), f2(T(np.ones(2)))

    return step


@case("composition", 3)
def compile_of_compile(C, k):
    s = [2.0]
    f = C(C(lambda x: x * s[0]))

    def step(i):
        if i + 1 == k:
            s[0] = 3.0
        return f(T(np.ones(2)))

    return step


@case("composition", 10)
def compiled_inner_closure_changes(C, k):
    s = [2.0]
    inner = C(lambda x: x * s[0])
    outer = C(lambda x: inner(x) + 1)

    def step(i):
        if i + 1 == k:
            s[0] = 3.0
        return outer(T(np.ones(2)))

    return step


@case("composition", 3)
def compiled_recursion_on_value(C, k):
    def rec(x, n):
        return x if n == 0 else rec(x * 2, n - 1)

    f = C(lambda x: rec(x, int(x.sum()) % 4))
    rec_c = C(rec)

    def step(i):
        x = T(np.array([1.0, 1.0]) + (1.0 if i + 1 >= k else 0.0))
        return f(x), rec_c(x, 2 + (i + 1 >= k))

    return step


@case("composition", 3)
def grad_of_compiled_with_branch(C, k):
    f = C(lambda x: (x**2).sum() if (x.sum() > 0) else (x**3).sum())
    g = tt.grad(f)

    def step(i):
        return g(T(np.array([1.0, 2.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("composition", 3)
def value_and_grad_of_compiled_closed_tensor(C, k):
    w = T(np.array([1.0, 2.0]))
    f = C(lambda x: (x * w).sum())
    vg = tt.value_and_grad(f)

    def step(i):
        if i + 1 == k:
            w.data = np.array([5.0, -1.0])
        return vg(T(np.ones(2)))

    return step


@case("composition", 10)
def hessian_of_compiled(C, k):
    s = [1.0]
    f = C(lambda x: (tt.sin(x) * s[0]).sum())
    h = tt.hessian(f)

    def step(i):
        if i + 1 == k:
            s[0] = 2.0
        return h(T(np.array([0.3, 0.7])))

    return step


@case("composition", 3)
def jvp_of_compiled_with_mask(C, k):
    f = C(lambda x: tt.where(x > 0, x**2, -x))

    def step(i):
        x = T(np.array([1.0, -2.0]) * (-1.0 if i + 1 >= k else 1.0))
        return tt.jvp(f, (x,), (T(np.ones(2)),))

    return step


@case("composition", 3)
def compiled_value_and_grad_with_int_branch(C, k):
    f = C(tt.value_and_grad(lambda w, x: (w * x).sum() * (1.0 if int(x.sum()) % 2 else 2.0)))

    def step(i):
        return f(np.array([1.0, 2.0]), np.array([1.0, 2.0]) + (1.0 if i + 1 >= k else 0.0))

    return step


@case("composition", 2)
def disable_toggled_with_state_change(C, k):
    s = [2.0]
    f = C(lambda x: x * s[0])

    def step(i):
        if i + 1 == k:
            prev = tt.compile.disable()
            s[0] = 3.0
            out = f(T(np.ones(2)))
            tt.compile.disable(prev)
            return out
        return f(T(np.ones(2)))

    return step


@case("composition", 40, n=42)
def recompile_limit_then_closure_flip(C, k):
    s = [1.0]
    f = C(lambda x: x * (2.0 if s[0] > 0 else 3.0) * float(x.sum()))

    def step(i):
        if i + 1 == k:
            s[0] = -1.0
        return f(T(np.ones(2) * (i + 1)))

    return step


@case("composition", 10)
def cache_size_one_alternating(C, k):
    f = (
        tt.compile(lambda x: x * 2 if (x > 0).all() else x * 3, cache_size=1)
        if C is not mh._eager_C
        else (lambda x: x * 2 if (x > 0).all() else x * 3)
    )

    def step(i):
        sign = -1.0 if (i + 1 >= k and i % 2) else 1.0
        return f(T(np.ones(2) * sign))

    return step


@case("composition", 3)
def check_true_flip_after_second(C, k):
    f = (
        tt.compile(lambda x: x * 2 if float(x.sum()) > 0 else x, check=True)
        if C is not mh._eager_C
        else (lambda x: x * 2 if float(x.sum()) > 0 else x)
    )

    def step(i):
        return f(T(np.ones(2) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("composition", 3)
def threads_calling_one_compiled(C, k):
    s = [2.0]
    f = C(lambda x: x * s[0] if float(x.sum()) > 0 else -x)

    def step(i):
        out = [None] * 8

        def run(j):
            r = f(T(np.ones(2) * (j - 3.5) * (i + 1)))
            out[j] = np.array(r.data if isinstance(r, tt.Tensor) else r)

        if i + 1 == k:
            s[0] = 5.0
        ts = [threading.Thread(target=run, args=(j,)) for j in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out

    return step


# ------------------------------------------------------------- more reads off traced values


@case("unlisted-read", 3)
def data_sum_as_python_float(C, k):
    f = C(lambda x: x * float(x.data.sum()))

    def step(i):
        return f(T(np.array([1.0, 2.0]) * (3.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 10)
def data_argmax_indexes_python_list(C, k):
    ws = [1.0, 10.0, 100.0]
    f = C(lambda x: x * ws[x.data.argmax()])

    def step(i):
        return f(T(np.array([3.0, 1.0, 2.0]) if i + 1 < k else np.array([1.0, 2.0, 3.0])))

    return step


@case("unlisted-read", 3)
def data_boolean_index_shape(C, k):
    f = C(lambda x: x * float(x.data[x.data > 0].size))

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def numpy_tolist_of_data(C, k):
    f = C(lambda x: x * x.numpy().tolist()[0])

    def step(i):
        return f(T(np.array([1.0, 2.0]) * (3.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 2)
def enumerate_zip_over_tensor_rows(C, k):
    def g(x):
        acc = x[0] * 0
        for j, (r, s) in enumerate(zip(x, x.tolist())):
            if s[0] > 0:
                acc = acc + r * j
        return acc

    f = C(g)

    def step(i):
        x = np.array([[1.0, 2.0], [-3.0, 4.0], [5.0, 6.0]])
        return f(T(x * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def dict_from_zip_of_tolist(C, k):
    f = C(lambda x: x * max(dict(zip("abc", x.tolist())).items(), key=lambda kv: kv[1])[1])

    def step(i):
        return f(T(np.array([1.0, 5.0, 2.0]) + (np.array([9.0, 0, 0]) if i + 1 >= k else 0)))

    return step


@case("unlisted-read", 3)
def bool_of_mask_data_any(C, k):
    f = C(lambda x: x * 2 if bool(np.asarray(x).any()) else x + 1)

    def step(i):
        return f(T(np.zeros(2) if i + 1 < k else np.array([0.0, 1.0])))

    return step


@case("unlisted-read", 10)
def np_where_on_data_indices(C, k):
    f = C(lambda x: x * float(np.argwhere(x.data > 0).shape[0]))

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def mask_astype_int_python_sum(C, k):
    f = C(lambda x: x * sum((x > 0).astype(int)))

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def mask_iterated_python_loop(C, k):
    def g(x):
        n = 0
        for b in x > 0:
            if b:
                n += 1
        return x * n

    f = C(g)

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 2)
def mask_element_indexed(C, k):
    f = C(lambda x: x * 2 if (x > 0)[0] else x * 3)

    def step(i):
        return f(T(np.array([1.0, -2.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def mask_sum_item(C, k):
    f = C(lambda x: x * (x > 0).sum().item())

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def mask_mean_python_float(C, k):
    f = C(lambda x: x * float(np.mean(x > 0)))

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 10)
def data_copy_then_python(C, k):
    f = C(lambda x: x * float(x.data.copy()[1]))

    def step(i):
        return f(T(np.array([1.0, 2.0]) * (3.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def numpy_scalar_from_data_in_math(C, k):
    f = C(lambda x: x * math.sqrt(x.data[1]))

    def step(i):
        return f(T(np.array([1.0, 4.0]) * (4.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def len_of_list_built_from_values(C, k):
    f = C(lambda x: x * len([v for v in x.data if v > 0]))

    def step(i):
        return f(T(np.array([1.0, -2.0, 3.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 2)
def data_item_method(C, k):
    f = C(lambda x: x * x.data.item(0))

    def step(i):
        return f(T(np.array([1.0, 2.0]) * (3.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def data_int_cast_index(C, k):
    ws = [1.0, 10.0, 100.0]
    f = C(lambda x: x * ws[x.data.astype(int)[0]])

    def step(i):
        return f(T(np.array([0.0, 1.0]) + (2.0 if i + 1 >= k else 0.0)))

    return step


@case("unlisted-read", 3)
def repr_of_tensor_as_key(C, k):
    f = C(lambda x: x * (2.0 if "-" in repr(x) else 1.0))

    def step(i):
        return f(T(np.array([1.0, 2.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


@case("unlisted-read", 3)
def np_sign_of_float_in_python(C, k):
    f = C(lambda x: x * np.sign(x.sum().item()))

    def step(i):
        return f(T(np.array([1.0, 2.0]) * (-1.0 if i + 1 >= k else 1.0)))

    return step


# ------------------------------------------------------------------ randomness and training


@case("randomness", 3)
def dropout_rng_generator_argument_replaced(C, k):
    f = C(lambda x, g: F.dropout(x, 0.5, True, rng=g))
    gens = [np.random.default_rng(1), np.random.default_rng(2)]

    def step(i):
        return f(T(np.ones((3, 4))), gens[i + 1 >= k]), gens

    return step


@case("randomness", 10)
def manual_seed_between_calls(C, k):
    f = C(lambda x: x + tt.randn(*x.shape))

    def step(i):
        if i + 1 == k:
            tt.manual_seed(123)
        return f(T(np.zeros(3)))

    return step


@case("randomness", 3)
def set_rng_state_between_calls(C, k):
    tt.manual_seed(5)
    saved = tt.get_rng_state()
    f = C(lambda x: x + tt.rand(*x.shape))

    def step(i):
        if i + 1 >= k and i % 2:
            tt.set_rng_state(saved)
        return f(T(np.zeros(3)))

    return step


@case("randomness", 3)
def seed_int_argument_to_randn(C, k):
    f = C(lambda x, seed: x + tt.randn(3, rng=seed))

    def step(i):
        return f(T(np.zeros(3)), 7 if i + 1 < k else 8)

    return step


@case("randomness", 2)
def generator_in_list_argument_unsupported(C, k):
    g = np.random.default_rng(4)
    f = C(lambda x, gs: x + tt.randn(3, rng=gs[0]))

    def step(i):
        return f(T(np.zeros(3)), [g]), g

    return step


@case("randomness", 10)
def multinomial_closed_generator_rebound_state(C, k):
    g = np.random.default_rng(0)
    st = g.bit_generator.state
    f = C(lambda p: tt.multinomial(p, 2, replacement=True, generator=g))

    def step(i):
        if i + 1 == k:
            g.bit_generator.state = st
        return f(T(np.array([0.2, 0.3, 0.5]))), g

    return step


@case("randomness", 3)
def dropout_module_generator_reseeded(C, k):
    d = nn.Dropout(0.5, rng=1)
    f = C(lambda x: d(x))

    def step(i):
        if i + 1 == k:
            d.load_state_dict(nn.Dropout(0.5, rng=9).state_dict())
        return f(T(np.ones((2, 5)))), d

    return step


def _model(seed=0):
    return nn.Sequential(_lin(seed, 3, 4), nn.Tanh(), _lin(seed + 1, 4, 1))


@case("training", 40, n=42)
def lr_from_param_groups_scheduled_outside(C, k):
    m = _model()
    opt = tt.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    sched = tt.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
    params = dict(m.named_parameters())

    def loss(p, x, y):
        return ((tt.nn.functional_call(m, p, x) - y) ** 2).mean() * opt.param_groups[0]["lr"]

    vg = C(tt.value_and_grad(loss))

    def step(i):
        x, y = _x(i, (6, 3)), _x(i, (6, 1), 100)
        if i + 1 == k:
            for g in opt.param_groups:
                g["lr"] = 1.0
        v, gs = vg({n: p.data for n, p in params.items()}, x, y)
        for n, p in params.items():
            p.grad = np.array(gs[n].data if isinstance(gs[n], tt.Tensor) else gs[n])
        opt.step()
        sched.step()
        return v, m, opt

    return step


@case("training", 10)
def compiled_forward_under_grad_then_backward(C, k):
    m = _model()
    opt = tt.optim.Adam(m.parameters(), lr=0.01)
    s = [1.0]
    f = C(lambda x, y: ((m(x) - y) ** 2).mean() * s[0])

    def step(i):
        if i + 1 == k:
            s[0] = 3.0
        opt.zero_grad()
        loss = f(T(_x(i, (6, 3))), T(_x(i, (6, 1), 100)))
        loss.backward()
        opt.step()
        return loss, m, opt

    return step


@case("training", 3)
def compiled_eval_pass_between_train_steps(C, k):
    m = nn.Sequential(_lin(0, 3, 4), nn.Dropout(0.3, rng=2), _lin(1, 4, 1))
    _frozen(m)
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 >= k:
            m.eval() if i % 2 else m.train()
        with tt.no_grad():
            return f(T(_x(i, (5, 3)))), m

    return step


@case("training", 3)
def optimizer_step_inside_refused(C, k):
    m = _model()
    opt = tt.optim.SGD(m.parameters(), lr=0.1)

    def g(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    f = C(g)

    def step(i):
        return f(T(_x(i, (6, 3))), T(_x(i, (6, 1), 100))), m

    return step


@case("training", 10)
def weight_decay_changed_in_param_groups(C, k):
    m = _model()
    opt = tt.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.0)
    f = C(tt.value_and_grad(lambda p, x, y: ((tt.nn.functional_call(m, p, x) - y) ** 2).mean()))
    params = dict(m.named_parameters())

    def step(i):
        if i + 1 == k:
            opt.param_groups[0]["weight_decay"] = 0.1
        v, gs = f({n: p.data for n, p in params.items()}, _x(i, (6, 3)), _x(i, (6, 1), 100))
        for n, p in params.items():
            p.grad = np.array(gs[n].data if isinstance(gs[n], tt.Tensor) else gs[n])
        opt.step()
        return v, m, opt

    return step


@case("training", 3)
def loss_scale_from_closed_optimizer_state(C, k):
    m = _frozen(_model())
    opt = tt.optim.SGD(m.parameters(), lr=0.1)
    f = C(lambda x: m(x).sum() * len(opt.param_groups))

    def step(i):
        if i + 1 == k:
            opt.add_param_group({"params": [T(np.ones(1), requires_grad=True)]}) if hasattr(
                opt, "add_param_group"
            ) else opt.param_groups.append({"params": [], "lr": 0.1})
        return f(T(_x(i, (2, 3))))

    return step


@case("modules", 40, n=42)
def batchnorm_in_sequential_train_40_calls(C, k):
    m = _frozen(nn.Sequential(_lin(0, 3, 3), nn.BatchNorm1d(3, dtype=np.float64)))
    f = C(lambda x: m(x))

    def step(i):
        x = _x(i, (5 if i + 1 < k else 7, 3))
        return f(T(x)), m

    return step


@case("modules", 10)
def batchnorm_in_sequential_running_stats_reset(C, k):
    m = _frozen(nn.Sequential(_lin(0, 3, 3), nn.BatchNorm1d(3, dtype=np.float64)))
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m[1].running_mean.data = np.zeros(3)
            m[1].running_var.data = np.ones(3)
        return f(T(_x(i, (5, 3)))), m

    return step


@case("randomness", 10)
def dropout_in_sequential_reseeded(C, k):
    m = nn.Sequential(nn.Dropout(0.5, rng=1))
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m.load_state_dict(nn.Sequential(nn.Dropout(0.5, rng=9)).state_dict())
        return f(T(np.ones((2, 5)))), m

    return step


@case("randomness", 3)
def dropout_in_sequential_p_changed(C, k):
    m = nn.Sequential(nn.Dropout(0.5, rng=1))
    f = C(lambda x: m(x))

    def step(i):
        if i + 1 == k:
            m[0].p = 0.9
        return f(T(np.ones((2, 5)))), m

    return step


# ------------------------------------------------------------------- dynamic name lookups

_GSCALE = 2.0


def _set_gscale(v):
    global _GSCALE
    _GSCALE = v


@case("dynamic-lookup", 3)
def globals_dict_subscript(C, k):
    _set_gscale(2.0)
    f = C(lambda x: x * globals()["_GSCALE"])

    def step(i):
        if i + 1 == k:
            _set_gscale(5.0)
        return f(T(np.ones(2)))

    return step


@case("dynamic-lookup", 3)
def eval_of_global_name(C, k):
    _set_gscale(2.0)
    f = C(lambda x: x * eval("_GSCALE"))

    def step(i):
        if i + 1 == k:
            _set_gscale(5.0)
        return f(T(np.ones(2)))

    return step


@case("dynamic-lookup", 10)
def vars_of_object(C, k):
    obj = _Obj()
    f = C(lambda x: x * vars(obj)["scale"])

    def step(i):
        if i + 1 == k:
            obj.scale = 6.0
        return f(T(np.ones(2)))

    return step


@case("dynamic-lookup", 3)
def sys_modules_lookup(C, k):
    H.SCALE = 2.0
    f = C(lambda x: x * sys.modules["adv_helper_mod"].SCALE)

    def step(i):
        if i + 1 == k:
            H.SCALE = 4.0
        return f(T(np.ones(2)))

    return step


class _TypeAttr:
    factor = 2.0

    def apply(self, x):
        return x * type(self).factor


@case("dynamic-lookup", 3)
def type_self_class_attribute(C, k):
    _TypeAttr.factor = 2.0
    obj = _TypeAttr()
    f = C(obj.apply)

    def step(i):
        if i + 1 == k:
            _TypeAttr.factor = 3.0
        return f(T(np.ones(2)))

    return step


@case("dynamic-lookup", 2)
def mutable_default_list_mutated(C, k):
    def g(x, cfg=[2.0]):  # noqa: B006
        return x * cfg[0]

    f = C(g)

    def step(i):
        if i + 1 == k:
            g.__defaults__[0][0] = 7.0
        return f(T(np.ones(2)))

    return step


# ---------------------------------------------------------------------------------- runner


KNOWN_GAPS = {
    # (sys_modules_lookup passes since round 10: a user's module named by a string the code that
    # ran holds is guarded through sys.modules)
}


def _marked(c):
    if c.name not in KNOWN_GAPS:
        return c
    return pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[c.name]))


@pytest.mark.parametrize("c", [_marked(c) for c in CASES], ids=[c.name for c in CASES])
def test_case(c):
    r = mh.classify(c)
    assert r.outcome in ("equal", "refused"), f"{c.name}: {r.outcome}: {r.detail}"


if __name__ == "__main__":
    import collections as _c

    counts = _c.Counter()
    for c in CASES:
        r = mh.classify(c)
        counts[r.outcome] += 1
        print(f"{r.outcome:22s} {c.name}: {mh.first_line(r.detail)[:200]}")
    print(dict(counts), len(CASES))
