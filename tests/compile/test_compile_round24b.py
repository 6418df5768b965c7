"""Round 24b: scientific and functional code ported from JAX and NumPy, compiled vs eager.

A fresh user's adversarial cases, written from README.md, docs/guides/*.md and the public
docstrings only, as a ``jax.jit`` / ``torch.compile`` / ``mx.compile`` / TinyJit user ports
scientific NumPy and JAX code. Each case builds the same set-up twice with the same seeds, runs
one copy eagerly and one through ``tt.compile`` in lockstep (12 calls; 42 for ``_long``), makes
changes outside the function before the 3rd, 10th and 40th call (or varies the arguments so a
value-dependent branch flips on those calls), and after every call compares bit for bit (type,
dtype, shape, bytes) the outputs, all earlier outputs, the arguments, the closed-over state,
parameters and ``.grad``, passed/closed Generators and tinytensor's global generator. An
exception eager raises must be raised compiled with the same type; a compiled refusal is
accepted only where compile.md/scipy.md list it (``refusal_ok``: boolean indexing, ``nonzero``,
one-argument ``np.where``, ``np.unique``, an error caught while recorded, a ``nonlocal``/list
written inside, a Generator's own method, an ``odeint`` right-hand side closing over an
argument).

Families found (strict xfails):

* **``.astype()`` of a NumPy scalar, then a number argument: 0-d ndarray instead of a NumPy
  scalar.** ``x.mean().astype(np.float16) * a`` (``x`` a float32 array argument, ``a`` a float
  argument) is an ``np.float16`` eagerly and a 0-d ``ndarray`` compiled, on every call
  (``sa_astype_f16_times_a``, ``_f32_``, ``_f64_``, ``sa_astype_plus_a``,
  ``sa_index_astype_times_a`` for ``x[0].astype(...)``, ``sa_np_multiply_astype_a``,
  ``sa_std_astype_times_a``, ``sa_prod_astype_minus_a``, ``sc_mean_astype_f16/f32/f64``). The
  same bytes; only the type differs. Equal: ``.astype()`` alone, times a constant
  (``sa_astype_times_const``), ``np.float64(x.sum()) * a``, ``np.sqrt(x.sum()) * a``, ``abs``,
  ``-``, ``.real``, ``np.round``.
* **``getattr(obj, "name", default)`` / ``hasattr`` does not see the class.** The guard on an
  attribute spelled as a string sees an instance attribute appear
  (``hold_getattr_default_instance`` is equal) but not a class attribute or property added to the
  object's class outside (``hold_getattr_default_class_attr``, ``_property``, ``_hasattr``), nor
  ``obj.__class__`` reassigned to a class that has it (``hold_swap_class``): the old default
  and the old branch come back silently. Reassigning ``__class__`` where ``obj.k`` or a method is
  read directly is seen (``hold_swap_class_attr``, ``hold_swap_class_method``).
* **A closed-over list of more than 64 floats with ``0.0 -> -0.0``** (``sz_big_list``): the sign
  of the old program comes back; compile.md already lists it as a known gap.

Tried and equal (411 cases, 9 of them refused as the docs list): value-dependent Python
control flow on array and Tensor arguments
(``if``/``while``/``break``/early ``return``/``raise``/``assert``, ternaries, ``min``/``max``/
``sorted``/``any``/``all`` over tensor values, ``int(...)`` loop bounds, ``.item()``,
``.tolist()``, ``float()``, ``np.asarray``, ``bool`` of masks, ``argmax`` as a list index or a
dict dispatch, slicing and ``reshape`` by a value, recursion to a value-dependent depth,
enumerate over a Tensor, a number-argument threshold; ``cf_*``, ``cfT_*``), iterative solvers
with convergence tests (Newton, bisection with bracket arguments, fixed point, power iteration,
conjugate gradient with a tolerance argument, Jacobi, secant, Newton with ``tt.grad`` inside,
Richardson on a closed-over ndarray/Tensor edited in place with a config dict changed;
``solve_*``), transforms (compile of ``grad``/``value_and_grad``/``argnums``/``has_aux``/
``jacobian`` rev and fwd/``hessian``/``grad`` of ``grad``/``jvp``/``vjp``/``hvp``/``vmap``/
``vmap(grad)``, and ``grad``/``value_and_grad``/``jacobian``/``hessian``/``vmap``/``jvp``/
``vjp``/``hvp`` of a compiled function, plain and compiled again; compiled functions calling
compiled functions with guards, numbers and ``grad``; ``tr_*``), closures and globals (NumPy
scalars, 0-d arrays edited in place, tuples, dicts, dataclasses, frozen dataclasses,
namedtuples, enum members, ``functools.partial``, lambdas in dicts, defaults and kwdefaults,
mutable defaults, bound methods, class attributes, a runtime module's attributes, globals
rebound to int/NumPy scalar/0-d array, held arrays rebound, sliced views of a held array edited
through the base, a 5,000-element array edited at its end, dict insertion order changed, same
value in another dtype or shape, ``int`` vs ``bool`` vs ``float`` of equal value, NaN, ``slice``
objects, einsum subscripts, dtype objects, complex, ``np.int8`` overflow, signed zeros in
scalars/lists/dicts/0-d and held arrays; ``gl_*``, ``cl_*``, ``hold_*``, ``sz_*``), randomness
(``tt.randn`` with a passed Generator, a closed one drawn from or rebound outside, an int seed
argument, the global generator, ``tt.rand`` dropout, value-dependent numbers of draws, a draw
before a value-dependent ``raise``/``assert``; ``rnd_*``), dtypes float16/32/64, int32/64, bool,
complex128 through sums, means, index, cumsum, number products and branches (``dt_*``), number
arguments as float/``np.float64``/int (``num_*``), 0-d result types (``sc_*``), ``tt.scipy``
special functions, ``stats.norm``, ``linalg`` (cholesky, cho_solve, solve_triangular, expm and
its gradient) and forward ``odeint`` (``sp_*``), ``no_grad``/``enable_grad`` inside and a
closed-over parameter's ``backward()`` outside with SGD (``gm_*``), and NumPy functions on
arrays, Tensors and ``.data`` mixed with float and ``np.float64`` arguments (std, var with
ddof, percentile, quantile, median, sort, argsort, cumsum, einsum, ``linalg.norm``, ptp, clip,
cov, average with weights, ``linalg.solve`` and a ``det`` branch; ``np_*``, ``npT_*``): the
std/var and ``linalg.norm`` differences round 23b reported are gone.
"""

import dataclasses
import enum
import functools
import math
import types
from collections import namedtuple

import numpy as np
import pytest

import tinytensor as tt

CHANGES = (2, 9, 39)  # 0-based: changes before the 3rd, 10th and 40th call


def phase(i):
    """How many change points call ``i`` has passed (0..3)."""
    return sum(i >= c for c in CHANGES)


def sgn(i):
    return 1.0 if phase(i) % 2 == 0 else -1.0


def arr(i, shape=(4,), seed=0, dtype=np.float64, scale=1.0):
    r = np.random.default_rng(1000 * seed + i)
    return (r.standard_normal(shape) * scale).astype(dtype)


# ----------------------------------------------------------------------------------------------
# canonical form: type, dtype, shape and bytes of everything


def canon(x, depth=0):
    if depth > 8:
        return ("deep",)
    if isinstance(x, tt.Tensor):
        return ("Tensor", canon(x.data, depth + 1), bool(x.requires_grad))
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, np.ascontiguousarray(x).tobytes())
    if isinstance(x, np.generic):
        return (type(x).__name__, np.asarray(x).tobytes())
    if isinstance(x, (bool, int, str, type(None))):
        return (type(x).__name__, repr(x))
    if isinstance(x, (float, complex)):
        return (type(x).__name__, np.asarray(x).tobytes())
    if isinstance(x, dict):
        return (type(x).__name__, [(canon(k), canon(v, depth + 1)) for k, v in x.items()])
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, [canon(v, depth + 1) for v in x])
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, canon(dataclasses.asdict(x), depth + 1))
    if isinstance(x, np.random.Generator):
        return ("Generator", canon(x.bit_generator.state, depth + 1))
    if isinstance(x, types.SimpleNamespace):
        return ("ns", canon(vars(x), depth + 1))
    return (type(x).__name__, repr(x))


class Refused(Exception):
    pass


def call(copy, args, kwargs):
    tt.set_rng_state(copy["rng"])
    try:
        out = copy["fn"](*args, **kwargs)
        exc = None
    except Exception as e:  # noqa: BLE001 - compared below
        out, exc = None, e
    copy["rng"] = tt.get_rng_state()
    return out, exc


def snapshot(copy):
    st = copy.get("state")
    return canon(st()) if st else None


def run_case(build, n_calls, refusal_ok):
    E, C = build(), build()
    for copy in (E, C):
        tt.manual_seed(1234)
        copy["rng"] = tt.get_rng_state()
        copy.setdefault("args", lambda i: ())
        copy.setdefault("kwargs", lambda i: {})
        copy.setdefault("mutate", lambda i: None)
        copy["outs"] = []
        copy["argvals"] = []
    E["fn"] = E["f"]
    C["fn"] = tt.compile(C["f"])
    for i in range(n_calls):
        E["mutate"](i)
        C["mutate"](i)
        ae, ke = E["args"](i), E["kwargs"](i)
        ac, kc = C["args"](i), C["kwargs"](i)
        assert canon((ae, ke)) == canon((ac, kc)), "harness: args differ"
        oe, ee = call(E, ae, ke)
        oc, ec = call(C, ac, kc)
        if "post" in E and ee is None and ec is None:
            E["post"](oe)
            C["post"](oc)
        if ec is not None and ee is None:
            msg = f"{type(ec).__name__}: {ec}"
            if refusal_ok and isinstance(ec, RuntimeError) and "tt.compile" in str(ec):
                return "refused"
            raise AssertionError(f"call {i}: compiled raised, eager did not: {msg[:400]}")
        if ee is not None:
            assert ec is not None, f"call {i}: eager raised {type(ee).__name__}, compiled returned"
            assert type(ec) is type(ee), f"call {i}: {type(ee).__name__} vs {type(ec).__name__}: {ec}"
        else:
            assert canon(oc) == canon(oe), f"call {i}: outputs differ\n{canon(oe)}\n{canon(oc)}"
        E["outs"].append(oe)
        C["outs"].append(oc)
        E["argvals"].append((ae, ke))
        C["argvals"].append((ac, kc))
        assert canon(C["outs"]) == canon(E["outs"]), f"call {i}: earlier outputs differ"
        assert canon(C["argvals"]) == canon(E["argvals"]), f"call {i}: arguments differ"
        assert snapshot(C) == snapshot(E), f"call {i}: state differs"
        assert canon(C["rng"]) == canon(E["rng"]), f"call {i}: global generator differs"
    return "equal"


CASES = {}


def case(name, n=None, refusal_ok=False):
    def deco(build):
        assert name not in CASES, name
        CASES[name] = (build, n or (42 if name.endswith("_long") else 12), refusal_ok)
        return build

    return deco


def simple(name, f, args, n=None, refusal_ok=False, state=None, mutate=None):
    """Register a case whose builder only needs fresh args (f has no state of its own)."""

    def build():
        d = {"f": f, "args": args}
        if state is not None:
            d["state"] = state
        if mutate is not None:
            d["mutate"] = mutate
        return d

    case(name, n, refusal_ok)(build)


# ==============================================================================================
# A. value-dependent Python control flow

def _if_sum(x):
    if tt.sum(x) > 0:
        return tt.exp(x) * 2
    return -tt.sin(x)


def _while_halve(x):
    n = 0
    while float(tt.max(tt.abs(x))) > 1.0:
        x = x / 2
        n += 1
    return x, n


def _break_loop(x):
    y = x
    for k in range(20):  # noqa: B007 - k is returned
        y = tt.tanh(y) * 0.9
        if float(tt.sum(y * y)) < 0.05:
            break
    return y, k


def _early_return(x):
    s = tt.sum(x)
    if s > 2:
        return s
    if s < -2:
        return -s * 3
    return s * 0.5


def _raise_neg(x):
    if tt.min(x) < -1.5:
        raise ValueError("too negative")
    return tt.log(x + 10)


def _assert_pos(x):
    assert float(tt.sum(x * x)) < 20.0, "too big"
    return tt.sqrt(x * x + 1)


def _ternary(x):
    return x * 2 if x[0] > 0 else x - 1


def _minmax(a, b):
    hi = max(tt.sum(a), tt.sum(b))
    lo = min(tt.sum(a), tt.sum(b))
    return hi - lo, hi


def _sorted_vals(x):
    vals = sorted([x[0], x[1], x[2], x[3]], key=float)
    return vals[0] * 1 + vals[-1] * 2


def _any_all(x):
    a = any(float(v) > 1.0 for v in x)
    b = all(float(v) > -1.5 for v in x)
    return (x * 2 if a else x) + (1.0 if b else -1.0)


def _int_bound(x):
    k = int(tt.sum(x > 0))
    y = x
    for _ in range(k):
        y = y * 0.5 + 1
    return y


def _item_use(x):
    m = x.max().item()
    return x / m if m > 0.5 else x * m


def _tolist_use(x):
    vals = x.tolist()
    return x * sum(vals), len([v for v in vals if v > 0])


def _float_use(x):
    f = float(tt.mean(x))
    return x - f, f


def _asarray_use(x):
    a = np.asarray(x)
    return x * a.max() + a.argmin()


def _bool_mask(x):
    m = x > 0
    if m.all():
        return x
    if m.any():
        return tt.where(m, x, 0 * x)
    return -x


def _len_nonzero(x):
    return x * len(np.nonzero(x.data > 0)[0])


def _where_one(x):
    (idx,) = np.where(x.data > 0)
    return x * idx.size


def _bool_index(x):
    return tt.sum(x[x.data > 0])


def _argmax_list(x):
    names = ["a", "b", "c", "d"]
    return {names[int(tt.argmax(x))]: x * 2}


def _round_float(x):
    return x * round(float(tt.sum(x)))


def _isfinite(x):
    v = float(tt.sum(tt.log(x)))
    return v if math.isfinite(v) else -1.0


def _isnan_data(x):
    y = tt.log(x)
    if np.isnan(y.data).any():
        return tt.where(np.isnan(y.data), 0.0, y)
    return y


def _py_sum(x):
    return sum(x.tolist()) * x


def _dtype_branch(x):
    return x.astype(np.float32) if float(x[0]) > 0 else x


def _dispatch(x):
    ops = {0: tt.sin, 1: tt.cos, 2: tt.tanh, 3: tt.exp}
    return ops[int(tt.argmax(x))](x)


def _slice_by_value(x):
    n = int(tt.sum(x > 0))
    return x[:n] * 2


def _reshape_by_value(x):
    k = 2 if float(x[0]) > 0 else 4
    return tt.reshape(x, (k, -1))


def _recurse(x, depth=0):
    if float(tt.sum(tt.abs(x))) < 0.5 or depth > 10:
        return x, depth
    return _recurse(x * 0.6, depth + 1)


def _try_chol(a):
    m = a @ a.T - 0.5 * np.eye(3)
    try:
        L = tt.linalg.cholesky(m)
        return tt.sum(L)
    except np.linalg.LinAlgError:
        return tt.sum(m) * 0


def _nested_cond(x, y):
    if tt.sum(x) > 0:
        if tt.sum(y) > 0:
            return x + y
        return x - y
    return x * y if float(tt.sum(y)) > 0 else x / (y * y + 1)


def _chained_cmp(x):
    s = float(tt.sum(x))
    if -1.0 < s < 1.0:
        return x * 0
    return x


def _return_count(x):
    c = int((x > 0).sum())
    return c


def _return_item(x):
    return tt.sum(x * x).item()


def _np_float_from(x):
    return np.float32(float(tt.sum(x))) * 2


def _while_count_long(x):
    k = 0
    s = tt.sum(x)
    while s > 0 and k < 30:
        s = s - 1
        k += 1
    return s, k


def _enumerate_tensor(x):
    out = 0.0
    for j, v in enumerate(x):
        if v > 0:
            out = out + v * j
    return out


def _if_int_tensor(k):
    return k * 2 if int(k.sum()) % 2 == 0 else k + 1


def _cond_on_shape_and_value(x):
    return x[: x.shape[0] // 2] if x[0] > x[-1] else x[x.shape[0] // 2:]


def _max_builtin_over(x):
    return max(x, key=lambda v: float(v)) * x


def _cmp_number_arg(x, thresh):
    return x * 2 if float(tt.sum(x)) > thresh else x


def _where_number_arg(x, thresh):
    return tt.where(x > thresh, x, thresh)


def _a1(i):
    return (arr(i) * 0.5 + sgn(i),)


def _a2(i):
    return (arr(i) + sgn(i) * 0.4, arr(i, seed=1) - sgn(i) * 0.3)


def _a_scale(i):
    return (arr(i) * (1 + 3 * phase(i)),)


def _a_pos(i):
    return (np.abs(arr(i)) + 0.1 * sgn(i) + 0.2,)


for _nm, _f, _a in [
    ("cf_if_sum", _if_sum, _a1),
    ("cf_while_halve", _while_halve, _a_scale),
    ("cf_break", _break_loop, _a_scale),
    ("cf_early_return", _early_return, lambda i: (arr(i) + sgn(i) * (0.3 + 0.4 * phase(i)),)),
    ("cf_raise", _raise_neg, lambda i: (arr(i) * (0.2 + phase(i)),)),
    ("cf_assert", _assert_pos, _a_scale),
    ("cf_ternary", _ternary, _a1),
    ("cf_minmax", _minmax, _a2),
    ("cf_sorted", _sorted_vals, _a1),
    ("cf_any_all", _any_all, _a1),
    ("cf_int_bound", _int_bound, _a1),
    ("cf_item", _item_use, _a1),
    ("cf_tolist", _tolist_use, _a1),
    ("cf_float", _float_use, _a1),
    ("cf_asarray", _asarray_use, _a1),
    ("cf_bool_mask", _bool_mask, lambda i: (arr(i) + 2 * sgn(i) * (phase(i) != 2),)),
    ("cf_argmax_list", _argmax_list, _a1),
    ("cf_round_float", _round_float, _a_scale),
    ("cf_isfinite", _isfinite, _a_pos),
    ("cf_isnan_data", _isnan_data, lambda i: (tt.tensor(arr(i) + 0.5 * sgn(i) + 0.5),)),
    ("cf_py_sum", _py_sum, _a1),
    ("cf_dtype_branch", _dtype_branch, _a1),
    ("cf_dispatch", _dispatch, _a1),
    ("cf_slice_by_value", _slice_by_value, _a1),
    ("cf_reshape_by_value", _reshape_by_value, lambda i: (arr(i, (8,)) + sgn(i),)),
    ("cf_recurse", _recurse, _a_scale),
    ("cf_nested_cond", _nested_cond, _a2),
    ("cf_chained_cmp", _chained_cmp, lambda i: (arr(i) * (0.05 + phase(i) % 2),)),
    ("cf_return_count", _return_count, _a1),
    ("cf_return_item", _return_item, _a1),
    ("cf_np_float_from", _np_float_from, _a1),
    ("cf_while_count_long", _while_count_long, lambda i: (arr(i) + 2 * sgn(i) + i * 0.1,)),
    ("cf_enumerate_tensor", _enumerate_tensor, _a1),
    ("cf_if_int_tensor", _if_int_tensor, lambda i: (np.arange(4) + i,)),
    ("cf_cond_shape_value", _cond_on_shape_and_value, _a1),
    ("cf_max_builtin_over", _max_builtin_over, _a1),
    ("cf_cmp_number_arg", _cmp_number_arg, lambda i: (arr(i), 0.3 * sgn(i) + 0.01 * i)),
    ("cf_where_number_arg", _where_number_arg, lambda i: (arr(i), 0.3 * sgn(i) + 0.01 * i)),
    ("cf_if_sum_long", _if_sum, _a1),
    ("cf_while_halve_long", _while_halve, _a_scale),
]:
    simple(_nm, _f, _a)

# documented refusals: results whose shape depends on values
for _nm, _f in [("cf_len_nonzero", _len_nonzero), ("cf_where_one_arg", _where_one),
                ("cf_bool_index", _bool_index)]:
    simple(_nm, _f, lambda i: (tt.tensor(arr(i) + 0.3 * sgn(i)),), refusal_ok=True)
# documented refusal: an error f catches while being recorded
simple("cf_try_chol", _try_chol, lambda i: (arr(i, (3, 3)) * (0.1 + phase(i) % 2),), refusal_ok=True)


# ==============================================================================================
# B. iterative solvers with convergence tests


def newton_sqrt(a, tol=1e-10):
    x = a * 0 + 1.0
    for k in range(50):
        x_new = 0.5 * (x + a / x)
        if float(tt.max(tt.abs(x_new - x))) < tol:
            return x_new, k
        x = x_new
    return x, 50


def bisection(c, lo=-3.0, hi=3.0):
    # root of t^3 + t - c (c a 0-d array), bracket [lo, hi]
    f = lambda t: t * t * t + t - c  # noqa: E731
    for k in range(60):  # noqa: B007 - k is returned
        mid = (lo + hi) / 2
        if f(mid) * f(lo) > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-8:
            break
    return (lo + hi) / 2 + c * 0, k


def fixed_point_cos(x0):
    x = x0
    n = 0
    while True:
        x_new = tt.cos(x)
        n += 1
        if tt.max(tt.abs(x_new - x)) < 1e-9 or n > 200:
            return x_new, n
        x = x_new


def power_iteration(A):
    v = tt.ones(A.shape[0]) / math.sqrt(A.shape[0])
    lam = 0.0
    for k in range(300):  # noqa: B007 - k is returned
        w = A @ v
        lam_new = float(v @ w)
        v = w / tt.linalg.norm(w)
        if abs(lam_new - lam) < 1e-10:
            break
        lam = lam_new
    return v, lam_new, k


def conjugate_gradient(A, b, tol=1e-10):
    x = b * 0
    r = b - A @ x
    p = r
    rs = tt.sum(r * r)
    for k in range(len(b)):  # noqa: B007 - k is returned
        Ap = A @ p
        alpha = rs / tt.sum(p * Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rs_new = tt.sum(r * r)
        if tt.sqrt(rs_new) < tol:
            break
        p = r + (rs_new / rs) * p
        rs = rs_new
    return x, k


def newton_grad_min(x0):
    f = lambda x: tt.sum(tt.exp(x) - 2 * x + 0.1 * x ** 4)  # noqa: E731
    g = tt.grad(f)
    x = x0
    for k in range(30):  # noqa: B007 - k is returned
        gx = g(x)
        if float(tt.max(tt.abs(gx))) < 1e-9:
            break
        h = tt.exp(x) + 1.2 * x ** 2
        x = x - gx / h
    return x, k


def gd_with_grad(x0, lr):
    f = lambda x: tt.sum((x - 1.0) ** 2 * tt.exp(0.1 * x))  # noqa: E731
    x = x0
    for _ in range(5):
        x = x - lr * tt.grad(f)(x)
    return x


def secant(c):
    f = lambda t: tt.exp(t) - c  # noqa: E731
    a, b = c * 0, c * 0 + 1.0
    for k in range(40):  # noqa: B007 - k is returned
        fa, fb = f(a), f(b)
        if float(tt.abs(fb)) < 1e-12 or fb == fa:
            break
        a, b = b, b - fb * (b - a) / (fb - fa)
    return b, k


def jacobi(A, b):
    D = tt.diagonal(A) if hasattr(tt, "diagonal") else np.diagonal(A)
    x = b * 0
    for k in range(200):
        x_new = (b - (A @ x - D * x)) / D
        if float(tt.linalg.norm(x_new - x)) < 1e-12:
            return x_new, k
        x = x_new
    return x, k


def _spd(i, n=5, seed=3):
    M = arr(i, (n, n), seed=seed)
    return M @ M.T + n * (1 + phase(i)) * np.eye(n)


def _diag_dom(i, n=5):
    M = arr(i, (n, n), seed=5) * 0.3
    return M + np.eye(n) * (n + phase(i))


for _nm, _f, _a in [
    ("solve_newton_sqrt", newton_sqrt, lambda i: (np.abs(arr(i)) * (1 + 10 * phase(i)) + 0.1,)),
    ("solve_newton_sqrt_tol_arg", newton_sqrt,
     lambda i: (np.abs(arr(i)) + 0.5, 1e-3 if phase(i) % 2 else 1e-12)),
    ("solve_bisection", bisection, lambda i: (np.array(arr(i, ())) * (1 + phase(i)),)),
    ("solve_bisection_bracket_args", bisection,
     lambda i: (np.array(0.7 + 0.1 * i), -2.0 - phase(i), 2.0 + phase(i))),
    ("solve_fixed_point_cos", fixed_point_cos, lambda i: (arr(i) * (1 + phase(i)),)),
    ("solve_power_iteration", power_iteration, lambda i: (_spd(i),)),
    ("solve_cg", conjugate_gradient, lambda i: (_spd(i), arr(i, (5,), seed=4))),
    ("solve_cg_tol_arg", conjugate_gradient,
     lambda i: (_spd(i), arr(i, (5,), seed=4), 1e-2 if phase(i) % 2 else 1e-12)),
    ("solve_newton_grad_min", newton_grad_min, lambda i: (arr(i) * (1 + phase(i)),)),
    ("solve_gd_grad_lr_arg", gd_with_grad, lambda i: (arr(i), 0.1 / (1 + i))),
    ("solve_secant", secant, lambda i: (np.array(1.5 + phase(i) + 0.01 * i),)),
    ("solve_jacobi", jacobi, lambda i: (_diag_dom(i), arr(i, (5,), seed=6))),
    ("solve_newton_sqrt_long", newton_sqrt, lambda i: (np.abs(arr(i)) * (1 + 10 * phase(i)) + 0.1,)),
    ("solve_cg_long", conjugate_gradient, lambda i: (_spd(i), arr(i, (5,), seed=4))),
    ("solve_fixed_point_cos_long", fixed_point_cos, lambda i: (arr(i) * (1 + phase(i)),)),
]:
    simple(_nm, _f, _a)


def _make_closed_solver(kind):
    def build():
        A = np.eye(4) * 3 + 0.1
        At = tt.tensor(A.copy())
        cfg = {"tol": 1e-10, "maxit": 50}

        def f(b):
            M = At if kind == "tensor" else A
            x = b * 0
            for k in range(cfg["maxit"]):  # noqa: B007 - k is returned
                r = b - M @ x
                if float(tt.linalg.norm(r)) < cfg["tol"]:
                    break
                x = x + 0.2 * r
            return x, k

        def mutate(i):
            if i in CHANGES:
                if kind == "tensor":
                    At.data[...] = At.data * 1.5
                else:
                    A[...] = A * 1.5
                cfg["tol"] = 1e-4 if i == 9 else 1e-10
                cfg["maxit"] = 30 + i

        return {"f": f, "args": lambda i: (arr(i),), "mutate": mutate,
                "state": lambda: (A, At, dict(cfg))}

    return build


case("solve_richardson_closed_ndarray_long")(_make_closed_solver("ndarray"))
case("solve_richardson_closed_tensor_long")(_make_closed_solver("tensor"))


# ==============================================================================================
# C. transforms composed with compile


def _loss(w, x):
    return tt.sum(tt.tanh(x @ w) ** 2) + 0.1 * tt.sum(w * w)


def _loss_branch(w, x):
    z = x @ w
    if tt.sum(z) > 0:
        return tt.sum(tt.sin(z) ** 2)
    return tt.sum(tt.exp(0.1 * z))


def _wx(i):
    return (arr(i, (3, 2)) * sgn(i), arr(i, (5, 3), seed=2))


def _scalar_f(x):
    return tt.sum(tt.sin(x) * x ** 3)


for _nm, _f, _a in [
    ("tr_compile_grad", tt.grad(_loss), _wx),
    ("tr_compile_value_and_grad", tt.value_and_grad(_loss), _wx),
    ("tr_compile_grad_argnums", tt.grad(_loss, argnums=(0, 1)), _wx),
    ("tr_compile_grad_branch", tt.grad(_loss_branch), _wx),
    ("tr_compile_vag_branch_long", tt.value_and_grad(_loss_branch), _wx),
    ("tr_compile_jacobian", tt.jacobian(lambda x: tt.tanh(x) * x[0]), _a1),
    ("tr_compile_jacobian_fwd", tt.jacobian(lambda x: tt.tanh(x) * x[0], mode="fwd"), _a1),
    ("tr_compile_hessian", tt.hessian(_scalar_f), _a1),
    ("tr_compile_grad_grad", tt.grad(lambda x: tt.grad(lambda y: tt.sum(tt.sin(y) ** 3))(x).sum()),
     _a1),
    ("tr_compile_jvp", lambda x, v: tt.jvp(tt.sin, (x,), (v,)), lambda i: (arr(i), arr(i, seed=2))),
    ("tr_compile_vjp_call", lambda x, u: tt.vjp(lambda y: tt.exp(y) * y, x)[1](u),
     lambda i: (arr(i), arr(i, seed=2))),
    ("tr_compile_hvp", lambda x, v: tt.hvp(_scalar_f, (x,), (v,)), lambda i: (arr(i), arr(i, seed=2))),
    ("tr_compile_grad_has_aux",
     tt.grad(lambda x: (_scalar_f(x), {"n": tt.sum(x * x)}), has_aux=True), _a1),
    ("tr_compile_vmap", tt.vmap(lambda v: tt.tanh(v) * tt.sum(v)), lambda i: (arr(i, (5, 3)),)),
    ("tr_compile_vmap_grad", tt.vmap(tt.grad(lambda v: tt.sum(tt.sin(v) ** 2))),
     lambda i: (arr(i, (5, 3)),)),
    ("tr_compile_grad_if_item", tt.grad(lambda x: tt.sum(x ** 2) if x[0].item() > 0 else tt.sum(x ** 3)),
     _a1),
]:
    simple(_nm, _f, _a)


def _register_tr_of_compile():
    # transform-of-compile: the eager copy uses the plain function; the compiled copy wraps
    # the transform around a compiled function (and is compiled again by the harness).
    specs = [
        ("tr_grad_of_compile", tt.grad, _loss, _wx),
        ("tr_grad_of_compile_branch", tt.grad, _loss_branch, _wx),
        ("tr_vag_of_compile", tt.value_and_grad, _loss, _wx),
        ("tr_jacobian_of_compile", tt.jacobian, lambda x: tt.tanh(x) * x[0], _a1),
        ("tr_hessian_of_compile", tt.hessian, _scalar_f, _a1),
        ("tr_vmap_of_compile", tt.vmap, lambda v: tt.tanh(v) * tt.sum(v), lambda i: (arr(i, (5, 3)),)),
        ("tr_grad_of_compile_float", tt.grad, lambda x: tt.sum(x * float(tt.sum(x).detach())), _a1),
        ("tr_grad_of_compile_item_branch", tt.grad,
         lambda x: tt.sum(x ** 2) if tt.sum(x).detach().item() > 0 else tt.sum(tt.sin(x)), _a1),
        ("tr_jvp_of_compile", lambda g: lambda x, v: tt.jvp(g, (x,), (v,)),
         lambda x: tt.tanh(x) * 2 if float(tt.sum(x).detach()) > 0 else tt.sin(x),
         lambda i: (arr(i) + sgn(i), arr(i, seed=2))),
        ("tr_vjp_of_compile", lambda g: lambda x, u: tt.vjp(g, x)[1](u),
         lambda x: tt.exp(x) * x, lambda i: (arr(i), arr(i, seed=2))),
        ("tr_hvp_of_compile", lambda g: lambda x, v: tt.hvp(g, (x,), (v,)),
         _scalar_f, lambda i: (arr(i), arr(i, seed=2))),
    ]
    for name, tr, inner, args in specs:
        for plain in (False, True):
            nm = name + ("_plain" if plain else "")

            CASES[nm] = ("tr_of", (tr, inner, args, plain), 12)


_register_tr_of_compile()


def run_tr_of(tr, inner, args, plain, n):
    """Eager: tr(inner); compiled: tr(tt.compile(inner)), called directly (plain) or itself
    wrapped in tt.compile."""
    ce = tr(inner)
    ci = tr(tt.compile(inner))
    if not plain:
        ci = tt.compile(lambda *a: tr(tt.compile(inner))(*a))
    outs_e, outs_c = [], []
    for i in range(n):
        ae, ac = args(i), args(i)
        oe = ce(*ae)
        oc = ci(*ac)
        outs_e.append(oe)
        outs_c.append(oc)
        assert canon(oc) == canon(oe), f"call {i}: outputs differ"
        assert canon(outs_c) == canon(outs_e)
        assert canon(ac) == canon(ae)


# compiled calling compiled
def _build_nested(kind):
    def build():
        inner = tt.compile(lambda x: tt.tanh(x) * 2 if float(tt.sum(x)) > 0 else tt.sin(x))
        inner2 = tt.compile(lambda x, s: x * s)

        def f(x):
            if kind == "simple":
                return inner(x) + 1
            if kind == "twice":
                return inner(inner(x)) + inner(-x)
            if kind == "number":
                return inner2(x, float(tt.sum(x)))
            if kind == "grad":
                return tt.grad(lambda y: tt.sum(inner(y) ** 2))(x)
            raise AssertionError

        return {"f": f, "args": _a1}

    return build


for _k in ("simple", "twice", "number", "grad"):
    case(f"tr_nested_compiled_{_k}")(_build_nested(_k))


# ==============================================================================================
# D. closures and globals of every kind, changed outside


@dataclasses.dataclass
class Cfg:
    scale: float = 1.5
    n: int = 2
    mode: str = "tanh"


@dataclasses.dataclass(frozen=True)
class FCfg:
    scale: float = 1.5


NT = namedtuple("NT", "a b")


class Act(enum.Enum):
    TANH = 1
    SIN = 2
    EXP = 3


class Holder:
    coef = 2.0
    shift = np.float32(0.5)


GLOBAL_SCALE = 1.0
GLOBAL_ARR = np.array([1.0, 2.0, 3.0, 4.0])
GLOBAL_LIST = [1.0, 2.0]
GLOBAL_NP32 = np.float32(1.25)
cfgmod = types.ModuleType("round24b_cfgmod")
cfgmod.ALPHA = 0.5
cfgmod.TABLE = {"k": 2}
cfgmod.ARR = np.arange(4.0)


def _g_scale(x):
    return x * GLOBAL_SCALE


def _g_arr(x):
    return x * GLOBAL_ARR + GLOBAL_ARR.sum()


def _g_arr_branch(x):
    return x * 2 if GLOBAL_ARR[0] > 1.5 else x - GLOBAL_ARR


def _g_list(x):
    return x * sum(GLOBAL_LIST) + len(GLOBAL_LIST)


def _g_np32(x):
    return x * GLOBAL_NP32


def _g_mod(x):
    return x * cfgmod.ALPHA + cfgmod.TABLE["k"] + cfgmod.ARR


def _g_class(x):
    return x * Holder.coef + Holder.shift


def _set_global(i, name, values):
    if i in CHANGES:
        globals()[name] = values[CHANGES.index(i)]


def _global_case(name, f, mutate, restore):
    def build():
        restore()
        return {"f": f, "args": _a1, "mutate": mutate}

    case(name)(build)


def _restore_globals():
    global GLOBAL_SCALE, GLOBAL_ARR, GLOBAL_LIST, GLOBAL_NP32
    GLOBAL_SCALE = 1.0
    GLOBAL_ARR = np.array([1.0, 2.0, 3.0, 4.0])
    GLOBAL_LIST = [1.0, 2.0]
    GLOBAL_NP32 = np.float32(1.25)
    cfgmod.ALPHA = 0.5
    cfgmod.TABLE = {"k": 2}
    cfgmod.ARR = np.arange(4.0)
    Holder.coef = 2.0
    Holder.shift = np.float32(0.5)


def _m_arr_inplace(i):
    if i in CHANGES:
        GLOBAL_ARR[0] += 1.0


def _m_arr_slice(i):
    if i in CHANGES:
        v = GLOBAL_ARR[1:3]
        v *= -1


def _m_list_append(i):
    if i in CHANGES:
        GLOBAL_LIST.append(float(i))


def _m_list_elem(i):
    if i in CHANGES:
        GLOBAL_LIST[0] = float(i)


def _m_mod(i):
    if i == 2:
        cfgmod.ALPHA = 0.75
    if i == 9:
        cfgmod.TABLE["k"] = 5
    if i == 39:
        cfgmod.ARR[2] = -1.0


def _m_class(i):
    if i == 2:
        Holder.coef = 3.0
    if i == 9:
        Holder.shift = np.float32(-0.5)
    if i == 39:
        Holder.coef = 3


for _nm, _f, _m in [
    ("gl_scale_float", _g_scale, lambda i: _set_global(i, "GLOBAL_SCALE", (2.0, -1.0, 0.5))),
    ("gl_scale_to_int", _g_scale, lambda i: _set_global(i, "GLOBAL_SCALE", (2, 3, 4))),
    ("gl_scale_to_np64", _g_scale, lambda i: _set_global(
        i, "GLOBAL_SCALE", (np.float64(2.0), np.float32(2.0), np.float16(2.0)))),
    ("gl_scale_to_0d", _g_scale, lambda i: _set_global(
        i, "GLOBAL_SCALE", (np.array(2.0), np.array(3.0, np.float32), np.array(4.0)))),
    ("gl_arr_rebound", _g_arr, lambda i: _set_global(
        i, "GLOBAL_ARR", (np.ones(4), np.arange(4.0, dtype=np.float32), np.zeros(4)))),
    ("gl_arr_inplace", _g_arr, _m_arr_inplace),
    ("gl_arr_slice_view_edit", _g_arr, _m_arr_slice),
    ("gl_arr_branch_inplace", _g_arr_branch, _m_arr_inplace),
    ("gl_list_append", _g_list, _m_list_append),
    ("gl_list_elem", _g_list, _m_list_elem),
    ("gl_np32", _g_np32, lambda i: _set_global(
        i, "GLOBAL_NP32", (np.float32(2.5), np.float32(-0.0), np.float32(3)))),
    ("gl_module_attr", _g_mod, _m_mod),
    ("gl_class_attr", _g_class, _m_class),
    ("gl_arr_inplace_long", _g_arr, _m_arr_inplace),
    ("gl_module_attr_long", _g_mod, _m_mod),
]:
    _global_case(_nm, _f, _m, _restore_globals)


def _closure_case(name, make):
    """make() -> (f, mutate, state)"""

    def build():
        f, mutate, state = make()
        d = {"f": f, "args": _a1, "mutate": mutate}
        if state is not None:
            d["state"] = state
        return d

    case(name)(build)


def _cl_np_scalar():
    s = np.float64(1.5)

    def f(x):
        return x * s

    def mutate(i):
        nonlocal s
        if i in CHANGES:
            s = np.float64(s * 2)

    return f, mutate, None


def _cl_0d_inplace():
    s = np.array(1.5)

    def f(x):
        return x * s + (1 if s > 2 else 0)

    def mutate(i):
        if i in CHANGES:
            s[()] = s * 2

    return f, mutate, lambda: s


def _cl_tuple():
    t = (1.0, 2.0)

    def f(x):
        return x * t[0] + t[1]

    def mutate(i):
        nonlocal t
        if i in CHANGES:
            t = (t[0] + 1, t[1] * -1)

    return f, mutate, None


def _cl_dict():
    d = {"a": 1.0, "b": [1, 2]}

    def f(x):
        return x * d["a"] * len(d["b"])

    def mutate(i):
        if i == 2:
            d["a"] = 3.0
        if i == 9:
            d["b"].append(3)
        if i == 39:
            d["c"] = 1

    return f, mutate, lambda: d


def _cl_dataclass():
    c = Cfg()

    def f(x):
        y = x * c.scale
        for _ in range(c.n):
            y = tt.tanh(y) if c.mode == "tanh" else tt.sin(y)
        return y

    def mutate(i):
        if i == 2:
            c.scale = 2.5
        if i == 9:
            c.n = 3
        if i == 39:
            c.mode = "sin"

    return f, mutate, lambda: c


def _cl_frozen():
    c = FCfg()

    def f(x):
        return x * c.scale

    def mutate(i):
        nonlocal c
        if i in CHANGES:
            c = FCfg(scale=c.scale + 1)

    return f, mutate, None


def _cl_namedtuple():
    nt = NT(1.0, 2.0)

    def f(x):
        return x * nt.a + nt.b

    def mutate(i):
        nonlocal nt
        if i in CHANGES:
            nt = nt._replace(a=nt.a * -2)

    return f, mutate, None


def _cl_enum():
    act = Act.TANH

    def f(x):
        if act is Act.TANH:
            return tt.tanh(x)
        if act == Act.SIN:
            return tt.sin(x)
        return tt.exp(x) * act.value

    def mutate(i):
        nonlocal act
        if i in CHANGES:
            act = [Act.SIN, Act.EXP, Act.TANH][CHANGES.index(i)]

    return f, mutate, None


def _cl_enum_value():
    act = Act.TANH

    def f(x):
        return x * act.value

    def mutate(i):
        nonlocal act
        if i in CHANGES:
            act = [Act.SIN, Act.EXP, Act.TANH][CHANGES.index(i)]

    return f, mutate, None


def _cl_partial():
    p = functools.partial(lambda x, s: x * s, s=2.0)

    def f(x):
        return p(x) + 1

    def mutate(i):
        nonlocal p
        if i in CHANGES:
            p = functools.partial(p.func, s=p.keywords["s"] + 1)

    return f, mutate, None


def _cl_partial_mutable_arg():
    lst = [2.0]
    p = functools.partial(lambda x, s: x * s[0], s=lst)

    def f(x):
        return p(x) + 1

    def mutate(i):
        if i in CHANGES:
            lst[0] += 1

    return f, mutate, None


def _cl_lambda_dict():
    fns = {"act": lambda x: tt.tanh(x)}

    def f(x):
        return fns["act"](x) * 2

    def mutate(i):
        if i in CHANGES:
            k = CHANGES.index(i)
            fns["act"] = [lambda x: tt.sin(x), lambda x: x * 3, lambda x: tt.exp(x)][k]

    return f, mutate, None


def _cl_lambda_dict_closure():
    fns = {}
    scale = [1.0]
    fns["act"] = lambda x: x * scale[0]

    def f(x):
        return fns["act"](x) * 2

    def mutate(i):
        if i in CHANGES:
            scale[0] += 1.5

    return f, mutate, None


def _cl_default_arg():
    def f(x, s=1.0, n=2):
        return x * s * n

    def mutate(i):
        if i in CHANGES:
            f.__defaults__ = (f.__defaults__[0] + 1, f.__defaults__[1])

    return f, mutate, None


def _cl_default_mutable():
    def f(x, s=[1.0]):  # noqa: B006 - the point of the case
        return x * s[0]

    def mutate(i):
        if i in CHANGES:
            f.__defaults__[0][0] += 1

    return f, mutate, None


def _cl_kwdefault():
    def f(x, *, s=1.0):
        return x * s

    def mutate(i):
        if i in CHANGES:
            f.__kwdefaults__ = {"s": f.__kwdefaults__["s"] * -2}

    return f, mutate, None


def _cl_held_arr_rebound():
    held = np.arange(4.0)

    def f(x):
        return x @ held + held[-1]

    def mutate(i):
        nonlocal held
        if i in CHANGES:
            held = held[::-1].copy()

    return f, mutate, None


def _cl_held_arr_slice_edit():
    base = np.arange(8.0)
    held = base[2:6]

    def f(x):
        return x * held

    def mutate(i):
        if i in CHANGES:
            base[3] = -i

    return f, mutate, lambda: base


def _cl_held_arr_np_compute():
    held = np.arange(4.0)

    def f(x):
        m = held.mean()
        s = np.std(held)
        return (x - m) / (s + 1) + np.sort(held)[::-1]

    def mutate(i):
        if i in CHANGES:
            held[i % 4] = 10.0 - i

    return f, mutate, lambda: held


def _cl_list_of_arrays_inner_edit():
    ws = [np.ones(4), np.full(4, 2.0)]

    def f(x):
        return x * ws[0] + ws[1]

    def mutate(i):
        if i in CHANGES:
            ws[1][0] = -i

    return f, mutate, lambda: ws


def _cl_tensor_data_edit():
    w = tt.tensor(np.ones(4))

    def f(x):
        return x * w if float(tt.sum(w)) > 3 else x - w

    def mutate(i):
        if i in CHANGES:
            w.data[0] = -5.0 if phase(i) % 2 else 1.0

    return f, mutate, lambda: w


def _cl_method_bound():
    class M:
        def __init__(self):
            self.k = 2.0

        def apply(self, x):
            return x * self.k

    m = M()

    def f(x):
        return m.apply(x)

    def mutate(i):
        if i in CHANGES:
            m.k = m.k + 1

    return f, mutate, None


def _cl_cell_number_branch():
    thr = 0.0

    def f(x):
        return x * 2 if float(tt.sum(x)) > thr else x

    def mutate(i):
        nonlocal thr
        if i in CHANGES:
            thr = [10.0, -10.0, 0.0][CHANGES.index(i)]

    return f, mutate, None


def _cl_int_np_loop():
    n = np.int64(2)

    def f(x):
        y = x
        for _ in range(n):
            y = tt.sin(y)
        return y

    def mutate(i):
        nonlocal n
        if i in CHANGES:
            n = np.int64(n + 1)

    return f, mutate, None


def _cl_nested_dict_depth():
    cfg = {"a": {"b": {"c": {"d": 1.0}}}}

    def f(x):
        return x * cfg["a"]["b"]["c"]["d"]

    def mutate(i):
        if i in CHANGES:
            cfg["a"]["b"]["c"]["d"] += 1.0

    return f, mutate, lambda: cfg


def _cl_set_iter():
    s = {1, 2}

    def f(x):
        return x * sum(s)

    def mutate(i):
        if i in CHANGES:
            s.add(10 + i)

    return f, mutate, None


def _cl_generator_fn_value():
    vals = [1.0, 2.0]

    def gen():
        yield from vals

    def f(x):
        return x * sum(gen())

    def mutate(i):
        if i in CHANGES:
            vals.append(1.0)

    return f, mutate, None


def _cl_nonlocal_counter():
    count = 0

    def f(x):
        nonlocal count
        count += 1
        return x * count

    return f, lambda i: None, lambda: count


def _cl_list_append_inside():
    log = []

    def f(x):
        log.append(1)
        return x * len(log)

    return f, lambda i: None, lambda: log


for _nm, _mk in [
    ("cl_np_scalar", _cl_np_scalar),
    ("cl_0d_inplace", _cl_0d_inplace),
    ("cl_tuple_rebound", _cl_tuple),
    ("cl_dict", _cl_dict),
    ("cl_dataclass", _cl_dataclass),
    ("cl_frozen_dataclass", _cl_frozen),
    ("cl_namedtuple", _cl_namedtuple),
    ("cl_enum", _cl_enum),
    ("cl_enum_value", _cl_enum_value),
    ("cl_partial", _cl_partial),
    ("cl_partial_mutable_arg", _cl_partial_mutable_arg),
    ("cl_lambda_dict", _cl_lambda_dict),
    ("cl_lambda_dict_closure", _cl_lambda_dict_closure),
    ("cl_default_arg", _cl_default_arg),
    ("cl_default_mutable", _cl_default_mutable),
    ("cl_kwdefault", _cl_kwdefault),
    ("cl_held_arr_rebound", _cl_held_arr_rebound),
    ("cl_held_arr_slice_edit", _cl_held_arr_slice_edit),
    ("cl_held_arr_np_compute", _cl_held_arr_np_compute),
    ("cl_list_of_arrays_inner_edit", _cl_list_of_arrays_inner_edit),
    ("cl_tensor_data_edit", _cl_tensor_data_edit),
    ("cl_method_bound", _cl_method_bound),
    ("cl_cell_number_branch", _cl_cell_number_branch),
    ("cl_int_np_loop", _cl_int_np_loop),
    ("cl_nested_dict_depth4", _cl_nested_dict_depth),
    ("cl_set_iter", _cl_set_iter),
    ("cl_generator_fn_value", _cl_generator_fn_value),
]:
    _closure_case(_nm, _mk)

# documented refusals: Python state f changes
for _nm, _mk in [("cl_nonlocal_counter", _cl_nonlocal_counter),
                 ("cl_list_append_inside", _cl_list_append_inside)]:
    def _b(_mk=_mk):
        f, mutate, state = _mk()
        return {"f": f, "args": _a1, "mutate": mutate, "state": state}

    case(_nm, refusal_ok=True)(_b)


# ==============================================================================================
# E. randomness


def _rnd_build(kind):
    def build():
        gen = np.random.default_rng(7)

        def f(x, *extra):
            if kind == "passed":
                return x + tt.randn(4, rng=extra[0])
            if kind == "closed":
                return x + tt.randn(4, rng=gen)
            if kind == "seed_arg":
                return x + tt.randn(4, rng=extra[0])
            if kind == "global":
                return x + tt.randn(4)
            if kind == "global_rand_dropout":
                m = tt.rand(4) > 0.3
                return tt.where(m, x / 0.7, 0 * x)
            if kind == "branch_draws":
                if tt.sum(x) > 0:
                    return x + tt.randn(4, rng=gen)
                return x + tt.randn(4, rng=gen) + tt.randn(4, rng=gen)
            if kind == "float32":
                return x.astype(np.float32) + tt.randn(4, rng=gen, dtype=np.float32)
            if kind == "np_gen_method":
                return x + gen.standard_normal(4)
            if kind == "loop_draws":
                n = int(tt.sum(x > 0))
                y = x
                for _ in range(n):
                    y = y + tt.rand(4, rng=gen)
                return y
            raise AssertionError

        passed = np.random.default_rng(11)

        def args(i):
            x = arr(i) + 0.4 * sgn(i)
            if kind == "passed":
                return (x, passed)
            if kind == "seed_arg":
                return (x, 100 + i)
            return (x,)

        return {"f": f, "args": args,
                "state": lambda: (gen.bit_generator.state, passed.bit_generator.state)}

    return build


for _k in ("passed", "closed", "seed_arg", "global", "global_rand_dropout", "branch_draws",
           "float32", "loop_draws"):
    case(f"rnd_{_k}")(_rnd_build(_k))
case("rnd_branch_draws_long")(_rnd_build("branch_draws"))
case("rnd_np_gen_method", refusal_ok=True)(_rnd_build("np_gen_method"))


# ==============================================================================================
# F. dtypes, 0-d results, scalar types

DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_, np.complex128]


def _dt_args(dt):
    def args(i):
        a = arr(i) * 3
        if dt is np.bool_:
            return ((a > 0),)
        if dt is np.complex128:
            return ((a + 1j * arr(i, seed=9)).astype(dt),)
        return (a.astype(dt),)

    return args


_DT_FNS = {
    "sum": lambda x: x.sum(),
    "tt_sum": lambda x: tt.sum(x),
    "mul_float": lambda x: x * 2.5,
    "mul_np32": lambda x: x * np.float32(2.5),
    "index0": lambda x: x[0],
    "cumsum": lambda x: np.cumsum(x),
    "mean": lambda x: x.mean(),
    "float_of_sum": lambda x: float(np.real(x.sum())),
    "branch_sum": lambda x: x + 1 if np.real(x.sum()) > 0 else x * 2,
}

for _dt in DTYPES:
    for _fn_name, _fn in _DT_FNS.items():
        simple(f"dt_{np.dtype(_dt).name}_{_fn_name}", _fn, _dt_args(_dt))


def _num_arg_case(name, f, val):
    simple(name, f, lambda i: (arr(i).astype(np.float32), val(i)))


for _nm, _f in [
    ("num_float_mul", lambda x, a: x * a),
    ("num_float_pow", lambda x, a: x ** 2 * (1 - a) ** 2),
    ("num_float_exp", lambda x, a: x * np.exp(-a)),
    ("num_float_return_num", lambda x, a: (x * a, a * 2)),
    ("num_float_tt_mul", lambda x, a: tt.mul(x, a)),
    ("num_float_branch", lambda x, a: x * a if a > 0 else x - a),
]:
    _num_arg_case(_nm, _f, lambda i: 0.5 * sgn(i) + 0.01 * i)
    _num_arg_case(_nm + "_np64", _f, lambda i: np.float64(0.5 * sgn(i) + 0.01 * i))
    _num_arg_case(_nm + "_int", _f, lambda i: int(2 * sgn(i)) + i)


# ==============================================================================================
# G. tt.scipy inside compile

sp = tt.scipy

for _nm, _f, _a in [
    ("sp_erf", lambda x: sp.special.erf(x) * 2, _a1),
    ("sp_gammaln", lambda x: sp.special.gammaln(x), _a_pos),
    ("sp_digamma", lambda x: sp.special.digamma(x), _a_pos),
    ("sp_expit_logit", lambda x: sp.special.logit(sp.special.expit(x)), _a1),
    ("sp_ndtri", lambda x: sp.special.ndtri(sp.special.ndtr(x)), _a1),
    ("sp_i0e", lambda x: sp.special.i0e(x), _a1),
    ("sp_logsumexp", lambda x: sp.special.logsumexp(x), _a1),
    ("sp_logsumexp_b", lambda x, b: sp.special.logsumexp(x, b=b, return_sign=True),
     lambda i: (arr(i), arr(i, seed=3))),
    ("sp_norm_logpdf", lambda x, s: sp.stats.norm.logpdf(x, 0.0, s),
     lambda i: (arr(i), 1.0 + 0.5 * phase(i))),
    ("sp_grad_gammaln", tt.grad(lambda x: tt.sum(sp.special.gammaln(x))), _a_pos),
    ("sp_branch_erf", lambda x: x if float(tt.sum(sp.special.erf(x))) > 0 else -x, _a1),
    ("sp_cholesky", lambda A: sp.linalg.cholesky(A, lower=True), lambda i: (_spd(i),)),
    ("sp_cho_solve", lambda A, b: sp.linalg.cho_solve(sp.linalg.cho_factor(A), b),
     lambda i: (_spd(i), arr(i, (5,)))),
    ("sp_solve_triangular", lambda A, b: sp.linalg.solve_triangular(np.tril(A) + 5 * np.eye(5), b,
                                                                   lower=True),
     lambda i: (arr(i, (5, 5)), arr(i, (5,)))),
    ("sp_expm", lambda A: sp.linalg.expm(A * 0.3), lambda i: (arr(i, (3, 3)),)),
    ("sp_grad_expm", tt.grad(lambda A: tt.sum(sp.linalg.expm(A * 0.3))), lambda i: (arr(i, (3, 3)),)),
    ("sp_gammainc", lambda x: sp.special.gammainc(2.0, x), _a_pos),
    ("sp_polygamma", lambda x: sp.special.polygamma(1, x), _a_pos),
]:
    simple(_nm, _f, _a)


def _ode_rhs(y, t, k):
    return -k * y + tt.sin(t) if isinstance(y, tt.Tensor) else -k * y + np.sin(t)


def _odeint_fwd(y0, k):
    with tt.no_grad():
        return sp.integrate.odeint(lambda y, t: -k * y, y0, np.linspace(0, 1, 5))


def _odeint_plain(y0):
    return sp.integrate.odeint(lambda y, t: -0.7 * y + 0.1 * t, y0, np.linspace(0, 1, 5))


def _odeint_args(y0, k):
    return sp.integrate.odeint(lambda y, t, k: -k * y, y0, np.linspace(0, 1, 4), args=(k,))


# documented refusal (scipy.md): a right-hand side closing over a value computed from arguments
simple("sp_odeint_no_grad", _odeint_fwd, lambda i: (arr(i, (2,)), 0.5 + 0.1 * phase(i)),
       refusal_ok=True)
simple("sp_odeint_plain", _odeint_plain, lambda i: (arr(i, (2,)),))
simple("sp_odeint_args_array", _odeint_args, lambda i: (arr(i, (2,)), np.array([0.5 + 0.1 * i])))


# ==============================================================================================
# H. grad mode inside


def _gm_build(kind):
    def build():
        w = tt.tensor(np.arange(4.0) * 0.1, requires_grad=True)

        def f(x):
            if kind == "no_grad_inside":
                with tt.no_grad():
                    y = x * w
                return y * 2
            if kind == "enable_grad_inside":
                with tt.enable_grad():
                    y = tt.sum(tt.sin(x * w))
                return y
            if kind == "mixed":
                with tt.no_grad():
                    s = tt.sum(w * x)
                return tt.sum(w * x) * s
            if kind == "branch_no_grad":
                with tt.no_grad():
                    big = float(tt.sum(w * x)) > 0
                return tt.sum(w * x) if big else tt.sum(w * w)
            raise AssertionError

        return {"f": f, "args": _a1, "state": lambda: (w, w.grad)}

    return build


for _k in ("no_grad_inside", "enable_grad_inside", "mixed", "branch_no_grad"):
    case(f"gm_{_k}")(_gm_build(_k))


def _gm_outside_build():
    def f(x):
        return tt.sum(tt.tanh(x) * 2)

    def build():
        d = {"f": f, "args": lambda i: (tt.tensor(arr(i), requires_grad=True),)}
        return d

    return build


case("gm_tensor_arg_requires_grad")(_gm_outside_build())


def _gm_backward_build(long=False):
    def build():
        w = tt.tensor(np.arange(4.0) * 0.1, requires_grad=True)
        cf_holder = {}

        def f(x):
            loss = tt.sum(tt.tanh(x * w)) if float(tt.sum(x)) > 0 else tt.sum(w * w * x)
            return loss

        def post(out):
            out.backward()  # outside: accumulates into w.grad
            if long:
                with tt.no_grad():
                    w.data -= 0.1 * w.grad

        cf_holder["f"] = f
        return {"f": f, "args": _a1, "state": lambda: (w, w.grad), "post": post}

    return build


case("gm_closed_param_branch")(_gm_backward_build())
case("gm_closed_param_branch_sgd_long")(_gm_backward_build(long=True))


# ==============================================================================================
# I. NumPy functions on tensors / .data, mixed with number arguments

for _nm, _f in [
    ("np_std_num", lambda x, a: np.std(x * a)),
    ("np_var_num", lambda x, a: np.var(x + a)),
    ("np_std_method_num", lambda x, a: (x * a).std()),
    ("np_percentile_num", lambda x, a: np.percentile(x * a, 30)),
    ("np_median_num", lambda x, a: np.median(x * a)),
    ("np_sort_num", lambda x, a: np.sort(x * a)),
    ("np_argsort_num", lambda x, a: np.argsort(x * a)),
    ("np_cumsum_num", lambda x, a: np.cumsum(x * a)),
    ("np_einsum_num", lambda x, a: np.einsum("i,i->", x, x * a)),
    ("np_linalg_norm_num", lambda x, a: np.linalg.norm(x * a)),
    ("np_linalg_norm_plain", lambda x, a: np.linalg.norm(x) * a),
    ("np_mean_num", lambda x, a: np.mean(x * a)),
    ("np_ptp_num", lambda x, a: np.ptp(x * a)),
    ("np_clip_num", lambda x, a: np.clip(x, -a, a)),
    ("np_quantile_num", lambda x, a: np.quantile(x + a, [0.25, 0.75])),
    ("np_cov_num", lambda x, a: np.cov(np.stack([x, x * a]))),
    ("np_dot_num", lambda x, a: np.dot(x, x) * a),
    ("np_var_ddof_num", lambda x, a: np.var(x * a, ddof=1)),
    ("np_average_num", lambda x, a: np.average(x, weights=np.abs(x) + a)),
]:
    for _sfx, _val in [("", lambda i: 1.0 + 0.37 * i), ("_np64", lambda i: np.float64(1.0 + 0.37 * i))]:
        simple(_nm + _sfx, _f, lambda i, _val=_val: (arr(i, (7,)), _val(i)))

simple("np_unique", lambda x: np.unique(np.round(x)), lambda i: (arr(i, (7,)) * (1 + phase(i)),),
       refusal_ok=True)
simple("np_linalg_solve", lambda A, b: np.linalg.solve(A, b), lambda i: (_spd(i), arr(i, (5,))))
simple("np_linalg_solve_branch",
       lambda A, b: np.linalg.solve(A, b) if np.linalg.det(A) > 1e3 else b,
       lambda i: (_spd(i, n=3) * (0.5 + phase(i) % 2 * 10), arr(i, (3,))))
simple("np_std_float32_num", lambda x, a: np.std(x * a),
       lambda i: (arr(i, (7,)).astype(np.float32), 1.0 + 0.37 * i))



# ==============================================================================================
# J. more adversarial holders and values: signed zeros, dict order, same value other dtype,
#    Tensor arguments through value branches, draws before a raise


def _tensor_args(args):
    return lambda i: tuple(tt.tensor(a) if isinstance(a, np.ndarray) else a for a in args(i))


for _nm, _f, _a in [
    ("cfT_if_sum", _if_sum, _a1),
    ("cfT_while_halve", _while_halve, _a_scale),
    ("cfT_break", _break_loop, _a_scale),
    ("cfT_early_return", _early_return, lambda i: (arr(i) + sgn(i) * (0.3 + 0.4 * phase(i)),)),
    ("cfT_raise", _raise_neg, lambda i: (arr(i) * (0.2 + phase(i)),)),
    ("cfT_minmax", _minmax, _a2),
    ("cfT_sorted", _sorted_vals, _a1),
    ("cfT_any_all", _any_all, _a1),
    ("cfT_int_bound", _int_bound, _a1),
    ("cfT_item", _item_use, _a1),
    ("cfT_tolist", _tolist_use, _a1),
    ("cfT_asarray", _asarray_use, _a1),
    ("cfT_bool_mask", _bool_mask, lambda i: (arr(i) + 2 * sgn(i) * (phase(i) != 2),)),
    ("cfT_dispatch", _dispatch, _a1),
    ("cfT_slice_by_value", _slice_by_value, _a1),
    ("cfT_recurse", _recurse, _a_scale),
    ("cfT_enumerate", _enumerate_tensor, _a1),
    ("cfT_max_builtin_over", _max_builtin_over, _a1),
    ("cfT_return_count", _return_count, _a1),
    ("cfT_np_float_from", _np_float_from, _a1),
    ("solveT_newton_sqrt", newton_sqrt, lambda i: (np.abs(arr(i)) * (1 + 10 * phase(i)) + 0.1,)),
    ("solveT_power_iteration", power_iteration, lambda i: (_spd(i),)),
    ("solveT_cg", conjugate_gradient, lambda i: (_spd(i), arr(i, (5,), seed=4))),
    ("solveT_cg_long", conjugate_gradient, lambda i: (_spd(i), arr(i, (5,), seed=4))),
    ("solveT_bisection", bisection, lambda i: (np.array(arr(i, ())) * (1 + phase(i)),)),
    ("solveT_secant", secant, lambda i: (np.array(1.5 + phase(i) + 0.01 * i),)),
    ("npT_std_num", lambda x, a: np.std(x * a), lambda i: (arr(i, (7,)), 1.0 + 0.37 * i)),
    ("npT_median_num", lambda x, a: np.median(x * a), lambda i: (arr(i, (7,)), 1.0 + 0.37 * i)),
    ("npT_sort_data", lambda x, a: np.sort(x.data) * a, lambda i: (arr(i, (7,)), 1.0 + 0.37 * i)),
    ("npT_argsort_data", lambda x, a: x[np.argsort(x.data)] * a,
     lambda i: (arr(i, (7,)), 1.0 + 0.37 * i)),
    ("npT_linalg_norm", lambda x, a: np.linalg.norm(x * a), lambda i: (arr(i, (7,)), 1.0 + 0.37 * i)),
    ("npT_percentile_data", lambda x, a: np.percentile(x.data, 30) * a,
     lambda i: (arr(i, (7,)), 1.0 + 0.37 * i)),
    ("npT_einsum", lambda A, x: np.einsum("ij,j->i", A, x), lambda i: (arr(i, (3, 4)), arr(i))),
    ("npT_solve", lambda A, b: np.linalg.solve(A, b), lambda i: (_spd(i), arr(i, (5,)))),
]:
    simple(_nm, _f, _tensor_args(_a))


def _j_case(name, make, args=_a1):
    def build():
        f, mutate, state = make()
        d = {"f": f, "args": args, "mutate": mutate}
        if state is not None:
            d["state"] = state
        return d

    case(name)(build)


def _sz_held_array():
    held = np.zeros(4)

    def f(x):
        return x / (held + 0.0) * 0 + np.copysign(1.0, held)

    def mutate(i):
        if i in CHANGES:
            held[1] = -held[1]

    return f, mutate, lambda: held


def _sz_np_scalar():
    s = np.float64(0.0)

    def f(x):
        return x * np.copysign(2.0, s)

    def mutate(i):
        nonlocal s
        if i in CHANGES:
            s = -s

    return f, mutate, None


def _sz_float():
    s = 0.0

    def f(x):
        return x * math.copysign(2.0, s)

    def mutate(i):
        nonlocal s
        if i in CHANGES:
            s = -s

    return f, mutate, None


def _sz_list():
    s = [0.0, 1.0]

    def f(x):
        return x * np.copysign(2.0, s[0]) + s[1]

    def mutate(i):
        if i in CHANGES:
            s[0] = -s[0]

    return f, mutate, None


def _sz_dict():
    s = {"z": 0.0}

    def f(x):
        return x / s["z"] if False else x * math.copysign(1.0, s["z"])

    def mutate(i):
        if i in CHANGES:
            s["z"] = -s["z"]

    return f, mutate, None


def _sz_tensor_arg_0d():
    # a closed-over 0-d array rather than a scalar
    s = np.array(0.0)

    def f(x):
        return x * np.copysign(3.0, s)

    def mutate(i):
        if i in CHANGES:
            s[()] = -s

    return f, mutate, lambda: s


def _dict_order():
    d = {"a": 0.1, "b": 1e8, "c": -1e8}

    def f(x):
        y = x
        for v in d.values():
            y = y + v
        return y

    def mutate(i):
        if i in CHANGES:
            k = next(iter(d))
            v = d.pop(k)
            d[k] = v

    return f, mutate, lambda: list(d.items())


def _dict_order_keys():
    d = {"sin": tt.sin, "tanh": tt.tanh}

    def f(x):
        for fn in d.values():
            x = fn(x)
        return x

    def mutate(i):
        if i in CHANGES:
            k = next(iter(d))
            d[k] = d.pop(k)

    return f, mutate, None


def _dtype_same_value_scalar():
    s = np.float64(0.1)

    def f(x):
        return x * s

    def mutate(i):
        nonlocal s
        if i in CHANGES:
            s = np.float32(0.1) if isinstance(s, np.float64) else np.float64(0.1)

    return f, mutate, None


def _dtype_same_value_array():
    held = np.array([1.0, 2.0, 3.0, 4.0])

    def f(x):
        return x.astype(np.float32) * held

    def mutate(i):
        nonlocal held
        if i in CHANGES:
            held = held.astype(np.float32) if held.dtype == np.float64 else held.astype(np.float64)

    return f, mutate, None


def _dtype_same_value_int_array():
    held = np.array([1, 2, 3, 4])

    def f(x):
        return (x * 1000).astype(np.int32) // held

    def mutate(i):
        nonlocal held
        if i in CHANGES:
            held = held.astype(np.float64) if held.dtype.kind == "i" else held.astype(np.int64)

    return f, mutate, None


def _shape_same_value_array():
    held = np.ones(4)

    def f(x):
        return x * held

    def mutate(i):
        nonlocal held
        if i in CHANGES:
            held = np.ones((1, 4)) if held.ndim == 1 else np.ones(4)

    return f, mutate, None


def _int_vs_bool():
    flag = True

    def f(x):
        return x * flag + (x if flag is True else 0)

    def mutate(i):
        nonlocal flag
        if i in CHANGES:
            flag = 1 if flag is True else True

    return f, mutate, None


def _int_vs_float_equal():
    n = 2

    def f(x):
        return (x * 1000).astype(np.int64) * n

    def mutate(i):
        nonlocal n
        if i in CHANGES:
            n = 2.0 if isinstance(n, int) else 2

    return f, mutate, None


def _nan_held():
    held = np.array([1.0, np.nan])

    def f(x):
        return x[:2] * np.nan_to_num(held, nan=2.0)

    def mutate(i):
        if i in CHANGES:
            held[1] = 5.0 if np.isnan(held[1]) else np.nan

    return f, mutate, lambda: held


def _slice_obj():
    sl = slice(0, 2)

    def f(x):
        return x[sl] * 2

    def mutate(i):
        nonlocal sl
        if i in CHANGES:
            sl = slice(sl.start + 1, sl.stop + 1)

    return f, mutate, None


def _einsum_spec():
    spec = ["i,i->i"]

    def f(x):
        return np.einsum(spec[0], x, x)

    def mutate(i):
        if i in CHANGES:
            spec[0] = "i,j->ij" if spec[0] == "i,i->i" else "i,i->i"

    return f, mutate, None


def _dtype_obj():
    dt = np.float32

    def f(x):
        return x.astype(dt) * 2

    def mutate(i):
        nonlocal dt
        if i in CHANGES:
            dt = np.float16 if dt is np.float32 else np.float32

    return f, mutate, None


def _gen_drawn_outside():
    gen = np.random.default_rng(3)

    def f(x):
        return x + tt.randn(4, rng=gen)

    def mutate(i):
        if i in CHANGES:
            gen.standard_normal(3)

    return f, mutate, lambda: gen


def _gen_rebound():
    gen = np.random.default_rng(3)

    def f(x):
        return x + tt.randn(4, rng=gen)

    def mutate(i):
        nonlocal gen
        if i in CHANGES:
            gen = np.random.default_rng(100 + i)

    return f, mutate, lambda: gen


def _draw_then_raise():
    gen = np.random.default_rng(3)

    def f(x):
        noise = tt.randn(4, rng=gen)
        if float(tt.sum(x)) < 0:
            raise ValueError("negative")
        return x + noise

    return f, lambda i: None, lambda: gen


def _draw_then_assert():
    def f(x):
        noise = tt.rand(4)
        assert float(tt.max(x)) < 1.5
        return x * noise

    return f, lambda i: None, None


def _complex_closed():
    c = 1 + 1j

    def f(x):
        return (x * c).real

    def mutate(i):
        nonlocal c
        if i in CHANGES:
            c = complex(c.real, -c.imag)

    return f, mutate, None


def _tuple_of_arrays_inplace():
    t = (np.ones(4), np.zeros(4))

    def f(x):
        return x * t[0] + t[1]

    def mutate(i):
        if i in CHANGES:
            t[1][2] += 1.5

    return f, mutate, lambda: t


def _big_list_signed_zero():
    lst = [0.0] * 70

    def f(x):
        return x * np.copysign(1.0, lst[5])

    def mutate(i):
        if i in CHANGES:
            lst[5] = -lst[5]

    return f, mutate, None


def _big_array_edit():
    held = np.linspace(0, 1, 5000)

    def f(x):
        return x * held[:4] + held.sum()

    def mutate(i):
        if i in CHANGES:
            held[4999] += 1.0

    return f, mutate, lambda: held


def _class_instance_swap_class():
    class A:
        k = 2.0

    class B:
        k = 2.0

        @property
        def scale(self):
            return 3.0

    obj = A()
    obj_scale = {"s": 1.0}

    def f(x):
        return x * obj.k * getattr(obj, "scale", obj_scale["s"])

    def mutate(i):
        if i in CHANGES:
            obj.__class__ = B if obj.__class__ is A else A

    return f, mutate, None


def _closure_cell_of_inner_fn():
    scale = 2.0

    def helper(x):
        return x * scale

    def f(x):
        return helper(x) + 1

    def mutate(i):
        nonlocal scale
        if i in CHANGES:
            scale = -scale

    return f, mutate, None


def _helper_default():
    def helper(x, s=2.0):
        return x * s

    def f(x):
        return helper(x)

    def mutate(i):
        if i in CHANGES:
            helper.__defaults__ = (helper.__defaults__[0] + 1,)

    return f, mutate, None


def _np_int_overflow():
    s = np.int8(100)

    def f(x):
        return (x * 10).astype(np.int8) + s

    def mutate(i):
        nonlocal s
        if i in CHANGES:
            s = np.int8(s + 10)

    return f, mutate, None


for _nm, _mk in [
    ("sz_held_array", _sz_held_array),
    ("sz_np_scalar", _sz_np_scalar),
    ("sz_float", _sz_float),
    ("sz_list", _sz_list),
    ("sz_dict", _sz_dict),
    ("sz_0d_array", _sz_tensor_arg_0d),
    ("sz_big_list", _big_list_signed_zero),
    ("hold_dict_order_values", _dict_order),
    ("hold_dict_order_fns", _dict_order_keys),
    ("hold_dtype_same_value_scalar", _dtype_same_value_scalar),
    ("hold_dtype_same_value_array", _dtype_same_value_array),
    ("hold_dtype_same_value_int_array", _dtype_same_value_int_array),
    ("hold_shape_same_values", _shape_same_value_array),
    ("hold_int_vs_bool", _int_vs_bool),
    ("hold_int_vs_float_equal", _int_vs_float_equal),
    ("hold_nan_held", _nan_held),
    ("hold_slice_obj", _slice_obj),
    ("hold_einsum_spec", _einsum_spec),
    ("hold_dtype_obj", _dtype_obj),
    ("hold_complex", _complex_closed),
    ("hold_tuple_of_arrays_inplace", _tuple_of_arrays_inplace),
    ("hold_big_array_edit", _big_array_edit),
    ("hold_swap_class", _class_instance_swap_class),
    ("hold_inner_fn_cell", _closure_cell_of_inner_fn),
    ("hold_helper_default", _helper_default),
    ("hold_np_int8_overflow", _np_int_overflow),
    ("rnd_gen_drawn_outside", _gen_drawn_outside),
    ("rnd_gen_rebound", _gen_rebound),
    ("rnd_draw_then_raise", _draw_then_raise),
    ("rnd_draw_then_assert", _draw_then_assert),
    ("hold_dict_order_values_long", _dict_order),
]:
    _j_case(_nm, _mk, args=_a1 if not _nm.startswith("rnd_draw") else
            (lambda i: (arr(i) + 0.6 * sgn(i),)))


# scalar result types with number arguments
for _nm, _f in [
    ("sc_np32_sum_times_float", lambda x, a: x.sum() * a),
    ("sc_np32_sum_plus_int", lambda x, a: x.sum() + int(a > 0)),
    ("sc_float_of_sum_times", lambda x, a: float(x.sum()) * a),
    ("sc_item_times", lambda x, a: x.sum().item() * a),
    ("sc_tt_sum_times", lambda x, a: tt.sum(x) * a),
    ("sc_index_times", lambda x, a: x[1] * a),
    ("sc_max_builtin", lambda x, a: max(x.sum(), a)),
    ("sc_min_builtin_number", lambda x, a: min(float(x.sum()), a)),
    ("sc_pow", lambda x, a: x.sum() ** 2 + a),
    ("sc_np_float64_arg", lambda x, a: x.sum() * np.float64(a)),
    ("sc_mean_astype", lambda x, a: x.mean().astype(np.float16) * a),
    ("sc_divmod", lambda x, a: divmod(x.sum(), 1.0 + abs(a))),
]:
    for _sfx, _dt in [("_f32", np.float32), ("_f64", np.float64), ("_f16", np.float16)]:
        simple(_nm + _sfx, _f, lambda i, _dt=_dt: (arr(i).astype(_dt), 0.5 * sgn(i) + 0.01 * i))




# .astype() of a NumPy scalar result, then a number argument
for _nm, _f in [
    ("sa_astype_only", lambda x, a: x.mean().astype(np.float16)),
    ("sa_astype_f16_times_a", lambda x, a: x.mean().astype(np.float16) * a),
    ("sa_astype_f32_times_a", lambda x, a: x.sum().astype(np.float32) * a),
    ("sa_astype_f64_times_a", lambda x, a: x.sum().astype(np.float64) * a),
    ("sa_astype_plus_a", lambda x, a: x.mean().astype(np.float16) + a),
    ("sa_index_astype_times_a", lambda x, a: x[0].astype(np.float64) * a),
    ("sa_np_multiply_astype_a", lambda x, a: np.multiply(x.mean().astype(np.float16), a)),
    ("sa_std_astype_times_a", lambda x, a: x.std().astype(np.float32) * a),
    ("sa_prod_astype_minus_a", lambda x, a: x.prod().astype(np.float64) - a),
    ("sa_astype_times_const", lambda x, a: x.mean().astype(np.float16) * 2.0),
    ("sa_np_float64_times_a", lambda x, a: np.float64(x.sum()) * a),
    ("sa_sqrt_sum_times_a", lambda x, a: np.sqrt(x.sum()) * a),
]:
    simple(_nm, _f, lambda i: (arr(i).astype(np.float32), 0.5 * sgn(i) + 0.01 * i))


def _swap_class_plain():
    class A:
        k = 2.0

    class B:
        k = 3.0

    obj = A()

    def f(x):
        return x * obj.k

    def mutate(i):
        if i in CHANGES:
            obj.__class__ = B if obj.__class__ is A else A

    return f, mutate, None


def _swap_class_method():
    class A:
        def act(self, x):
            return tt.tanh(x)

    class B(A):
        def act(self, x):
            return tt.sin(x)

    obj = A()

    def f(x):
        return obj.act(x) * 2

    def mutate(i):
        if i in CHANGES:
            obj.__class__ = B if type(obj) is A else A

    return f, mutate, None


_j_case("hold_swap_class_attr", _swap_class_plain)
_j_case("hold_swap_class_method", _swap_class_method)




def _getattr_default_class_gains(kind):
    def make():
        class A:
            k = 2.0

        obj = A()

        def f(x):
            if kind == "hasattr":
                return x * (3.0 if hasattr(obj, "scale") else 1.0)
            return x * getattr(obj, "scale", 1.0)

        def mutate(i):
            if i == 2:
                if kind == "property":
                    A.scale = property(lambda self: 3.0)
                elif kind == "instance":
                    obj.scale = 3.0
                else:
                    A.scale = 3.0
            if i == 9:
                if kind == "instance":
                    del obj.scale
                else:
                    del A.scale

        return f, mutate, None

    return make


for _k in ("class_attr", "property", "instance", "hasattr"):
    _j_case(f"hold_getattr_default_{_k}", _getattr_default_class_gains(_k))


# ==============================================================================================
# the test


def _xfail(name):
    return XFAIL.get(name)


XFAIL = {
    "sz_big_list": "a closed-over list longer than 64 floats: -0.0 -> 0.0 in it is not seen, "
                   "the old program's sign comes back (compile.md lists it as a known gap)",
    "hold_swap_class": "obj.__class__ reassigned to a class with a property read by "
                       "getattr(obj, 'scale', default): the compiled call keeps the old value",
    "hold_getattr_default_class_attr": "getattr(obj, 'scale', 1.0): a class attribute added to "
                                       "obj's class outside is not seen (old default used)",
    "hold_getattr_default_property": "getattr(obj, 'scale', 1.0): a property added to obj's "
                                     "class outside is not seen (old default used)",
    "hold_getattr_default_hasattr": "hasattr(obj, 'scale'): a class attribute added outside is "
                                    "not seen (the old branch runs)",
}
_SA = ("a NumPy scalar's .astype(...) combined with a number argument comes back as a 0-d "
       "ndarray instead of eager's NumPy scalar")
for _n in ("sc_mean_astype_f16", "sc_mean_astype_f32", "sc_mean_astype_f64",
           "sa_astype_f16_times_a", "sa_astype_f32_times_a", "sa_astype_f64_times_a",
           "sa_astype_plus_a", "sa_index_astype_times_a", "sa_np_multiply_astype_a",
           "sa_std_astype_times_a", "sa_prod_astype_minus_a"):
    XFAIL[_n] = _SA


# fixed after the round was written (their xfail markers dropped): each now equal to eager
FIXED = set(XFAIL) - {"sz_big_list"}


def _params():
    out = []
    for name in CASES:
        marks = []
        if name in XFAIL and name not in FIXED:
            marks = [pytest.mark.xfail(strict=True, reason=XFAIL[name])]
        out.append(pytest.param(name, id=name, marks=marks))
    return out


@pytest.mark.parametrize("name", _params())
def test_compile_vs_eager(name):
    entry = CASES[name]
    if entry[0] == "tr_of":
        tr, inner, args, plain = entry[1]
        run_tr_of(tr, inner, args, plain, entry[2])
        return
    build, n, refusal_ok = entry
    run_case(build, n, refusal_ok)


def test_case_count():
    assert len(CASES) >= 200
