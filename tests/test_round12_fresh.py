"""Round 12, a fresh user's attack on three promises (oracles: eager, SciPy, one process).

1. tt.compile with Python / NumPy numbers as arguments that change on the 3rd, 10th and 40th call.
2. tt.scipy.integrate.odeint / solve_ivp against SciPy's own solvers on the NumPy right-hand
   side (bit for bit), gradients against central differences.
3. DistributedDataParallel with allreduce="auto" | "shared" | "mpi" under `mpiexec -n 2`.

Cases that are not equal are `xfail(strict=True)` with a repro in the reason.
"""

import math
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.integrate as si

import tinytensor as tt

INT = tt.scipy.integrate


def _arr(v):
    return np.asarray(v.data if isinstance(v, tt.Tensor) else v)


def _sched(vals, n=45):
    """vals[0] for calls 1-2, then a change on the 3rd, 10th and 40th call."""
    return [vals[0] if i < 2 else vals[1] if i < 9 else vals[2] if i < 39 else vals[3] for i in range(n)]


def _same(e, c):
    if isinstance(e, (tuple, list)):
        return isinstance(c, (tuple, list)) and len(e) == len(c) and all(_same(a, b) for a, b in zip(e, c))
    if isinstance(e, dict):
        return isinstance(c, dict) and e.keys() == c.keys() and all(_same(e[k], c[k]) for k in e)
    if isinstance(e, (int, float, np.generic, str)):
        if type(e) is not type(c):
            return False
        if isinstance(e, str):
            return e == c
        if isinstance(e, (float, np.floating)):
            return (e == c and np.signbit(e) == np.signbit(c)) or (e != e and c != c)
        return e == c
    a, b = _arr(e), _arr(c)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b))
    return np.array_equal(a, b)


def _eager_vs_compiled(f, calls):
    """Run f eagerly and compiled on each argument tuple; return None or a description."""
    cf = tt.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, args in enumerate(calls):
            try:
                e = f(*args)
            except Exception as ex:  # noqa: BLE001
                e = ex
            try:
                c = cf(*args)
            except Exception as ex:  # noqa: BLE001
                c = ex
            if isinstance(e, Exception) or isinstance(c, Exception):
                if type(e) is not type(c):
                    return f"call {i + 1} {args!r}: eager {e!r}, compiled {c!r}"
                continue
            if not _same(e, c):
                return f"call {i + 1} {args!r}: eager {e!r}, compiled {c!r}"
    return None


# --------------------------------------------------------------------------------------------
# 1. tt.compile with numbers as arguments
# --------------------------------------------------------------------------------------------

X32 = tt.tensor(np.linspace(-1, 2, 5).astype(np.float32))
X64 = tt.tensor(np.linspace(-1, 2, 5))
XI32 = tt.tensor(np.arange(4, dtype=np.int32))
XU8 = tt.tensor(np.arange(4, dtype=np.uint8))

NUMBERS = {
    "float": [0.5, 1.5, -0.0, 3.25],
    "int": [2, 3, -7, 2**40],
    "bool": [True, True, False, True],
    "np_float32": [np.float32(0.5), np.float32(1.1), np.float32(-0.0), np.float32(3e38)],
    "np_float64": [np.float64(0.5), np.float64(1.1), np.float64(-0.0), np.float64(1e300)],
    "nan_inf": [1.0, float("nan"), float("inf"), -float("inf")],
    "huge_int": [1, 2**62, 2**63 + 5, 10**30],
    "int_float_switch": [1, 1.5, np.float32(2), np.int64(3)],
    "np_int": [np.int64(2), np.int32(3), np.int8(-4), np.uint8(200)],
}

UNARY_FUNCS = {
    "mul": lambda x, a: x * a,
    "tt_mul": lambda x, a: tt.mul(x, a),
    "tt_add_twice": lambda x, a: tt.add(x, a) + a,
    "python_arith_first": lambda x, a: x * (1 - a) + a**2,
    "tt_where": lambda x, a: tt.where(x > 0.5, x, a),
    "np_ufunc": lambda x, a: x * np.exp(-a),
    "floordiv_mod": lambda x, a: x + (a // 3) + (a % 3),
    "pow": lambda x, a: x**a,
    "rpow": lambda x, a: a**x,
    "branch": lambda x, a: x * 2 if a > 1 else x - a,
    "maximum": lambda x, a: tt.maximum(x, a),
    "abs_neg": lambda x, a: x * abs(a) - (-a),
    "tt_tensor": lambda x, a: x + tt.tensor(a),
    "np_asarray": lambda x, a: x + np.asarray(a),
    "np_scalar_times": lambda x, a: x + np.float64(2) * a,
    "min_max": lambda x, a: x * min(a, 2) + max(a, 0),
    "return_pair": lambda x, a: (x + 1, a),
    "return_python_arith": lambda x, a: (x + 1, a * 2 - 1) if not isinstance(a, np.floating) else (x + 1, a),
    "math_cos": lambda x, a: (
        x * math.cos(a) if math.isfinite(a) else x + 0
    ),  # not `else x`: the NameError below
    "fstring": lambda x, a: (x * 2, f"{a}"),
}


@pytest.mark.parametrize("data", ["f32", "f64"])
@pytest.mark.parametrize("kind", sorted(NUMBERS))
@pytest.mark.parametrize("fname", sorted(UNARY_FUNCS))
def test_compile_number_argument_matches_eager(fname, kind, data):
    x = X32 if data == "f32" else X64
    fn = UNARY_FUNCS[fname]
    calls = [(v,) for v in _sched(NUMBERS[kind], n=42)]
    assert _eager_vs_compiled(lambda a: fn(x, a), calls) is None


INT_CASES = {
    "int32_plus_int": (lambda a: XI32 + a, [1, 2, 2**31 - 1, 2**40]),
    "uint8_plus_int": (lambda a: XU8 + a, [1, 255, 256, -1]),
    "uint8_mul_int": (lambda a: XU8 * a, [1, 100, 2, 300]),
    "int32_truediv": (lambda a: XI32 / a, [1, 2, 0, -0.0]),
    "int32_floordiv": (lambda a: XI32 // a, [1, 2, 0, -3]),
    "int32_pow": (lambda a: XI32**a, [1, 2, 3, -1]),
    "int32_np_int8": (lambda a: XI32 + a, [np.int8(1), np.int8(2), np.int8(127), np.int8(-128)]),
    "py_div_zero": (lambda a: X64 * (1 / a), [1.0, 2.0, 0.0, 4.0]),
    "math_sqrt_neg": (lambda a: X64 * math.sqrt(a), [1.0, 4.0, -1.0, 9.0]),
    "np_log_zero": (lambda a: X64 * np.log(a), [1.0, 4.0, 0.0, -1.0]),
    "int_pow_big": (lambda a: X64 * (a**2), [1, 10**10, 10**20, 3]),
    "int_huge_times_f32": (lambda a: X32 + (a * 10**30), [1, 3, 0, 7]),
    "np16_times_f32": (lambda a: X32 * a, [np.float16(1), np.float16(3), np.float16(0.1), np.float16(7)]),
    "np16_ttmul_f32": (
        lambda a: tt.mul(X32, a),
        [np.float16(1), np.float16(3), np.float16(0.1), np.float16(7)],
    ),
    "np32_ttmul_f64": (
        lambda a: tt.mul(X64, a),
        [np.float32(1), np.float32(3), np.float32(0.1), np.float32(7)],
    ),
    "np64_ttwhere_f32": (
        lambda a: tt.where(X32 > 0, X32, a),
        [np.float64(1), np.float64(3), np.float64(0.1), np.float64(7)],
    ),
    "np_ufunc_on_array": (
        lambda a: X32 * np.multiply(np.arange(5, dtype=np.float32), a),
        [np.float64(1.0), np.float64(3.0), np.float64(0.1), np.float64(7.0)],
    ),
    "array_comparison": (lambda a: X64 * (np.arange(5.0) > a), [1.0, 0.5, 1.5, -1.0]),
    "copysign_negzero": (lambda a: X64 * math.copysign(1.0, a), [1.0, -0.0, 0.0, -1.0]),
    "divide_by_signed_zero": (lambda a: X64 / a, [1.0, -0.0, 0.0, -1.0]),
    "min_nan": (lambda a: X64 * min(a, 2.0), [1.0, float("nan"), 3.0, float("nan")]),
    "int_bitops": (lambda a: XI32 + (a & 3) + (a ^ 1), [1, 3, 2**20 + 1, 5]),
    "index": (lambda i: X64[i] * 2, [2, 3, 1, 4]),
    "reshape": (lambda n: tt.reshape(tt.tensor(np.arange(12.0)), (n, -1)) + 1, [2, 3, 4, 6]),
    "range": (lambda n: sum(X64 * k for k in range(n)), [2, 3, 1, 4]),
    "slice": (lambda n: X32[:n].sum() * n, [2, 3, 1, 4]),
    "np_zeros_shape": (lambda n: tt.tensor(np.zeros(n)) + n, [2, 3, 1, 4]),
    "tuple_argument": (lambda t: X32 * t[0] + t[1], [(1.0, 2), (0.5, 3), (-0.0, 1), (2.0, 2**40)]),
    "dict_argument": (
        lambda d: X64 * d["a"] - d["b"],
        [{"a": 1.0, "b": 2}, {"a": 0.5, "b": 3.5}, {"a": -0.0, "b": 1}, {"a": 2.0, "b": 2}],
    ),
    "return_dict": (lambda a: {"y": X64 * a, "a": a}, [0.5, 1.25, -0.0, 3.0]),
    "return_number": (lambda a: a, [0.5, 1.25, -0.0, 3.0]),
    "return_np_scalar": (lambda a: a, [np.float32(0.5), np.float32(1.25), np.float32(-0.0), np.float32(3.0)]),
    "local_list": (lambda a: [X64 * b for b in [a, a * 2]], [0.5, 1.25, -0.0, 3.0]),
    "isinstance_int": (lambda a: X64 * (2 if isinstance(a, int) else 3), [1, 1.0, 2, 2.0]),
    "nan_branch": (lambda a: X64 * 2 if a > 0 else X64 * 3, [1.0, float("nan"), -1.0, float("nan")]),
    "bool_and": (lambda a: XI32 * (a and 2), [True, False, True, False]),
}


@pytest.mark.parametrize("name", sorted(INT_CASES))
def test_compile_number_more_uses(name):
    fn, vals = INT_CASES[name]
    assert _eager_vs_compiled(fn, [(v,) for v in _sched(vals, n=42)]) is None


def _loss(w, a):
    return tt.sum(tt.tanh(w * a) ** 2) * a


W0 = np.linspace(-1, 1, 4)
F = [0.5, 1.25, -0.0, 3.0]


@pytest.mark.parametrize(
    "how",
    [
        "grad_of_compiled",
        "value_and_grad_of_compiled",
        "compiled_grad",
        "compiled_value_and_grad",
        "grad_wrt_number",
        "compiled_grad_wrt_number",
    ],
)
def test_compile_number_with_grad(how):
    fn = {
        "grad_of_compiled": lambda c: lambda a: tt.grad(c(_loss))(W0, a),
        "value_and_grad_of_compiled": lambda c: lambda a: tt.value_and_grad(c(_loss))(W0, a),
        "compiled_grad": lambda c: (lambda g: lambda a: g(W0, a))(c(tt.grad(_loss))),
        "compiled_value_and_grad": lambda c: (lambda g: lambda a: g(W0, a))(c(tt.value_and_grad(_loss))),
        "grad_wrt_number": lambda c: lambda a: tt.grad(c(_loss), argnums=1)(W0, a),
        "compiled_grad_wrt_number": lambda c: (lambda g: lambda a: g(W0, a))(c(tt.grad(_loss, argnums=1))),
    }[how]
    eager, comp = fn(lambda f: f), fn(tt.compile)
    for v in _sched(F, n=42):
        assert _same(eager(v), comp(v)), (how, v)


def test_compile_nested_compiled_with_number():
    inner = tt.compile(lambda y, a: y * a + a)
    assert _eager_vs_compiled(lambda a: inner(X64, a) * 2, [(v,) for v in _sched(F, n=42)]) is None


def test_compile_keyword_positional_defaults():
    def f(y, a=0.5, *, b=2):
        return y * a + b

    cf = tt.compile(f)
    for v in _sched([0.5, 1.25, -0.0, 3], n=42):
        for args, kw in [
            ((X32,), {"a": v}),
            ((X32, v), {}),
            ((X32,), {}),
            ((X32,), {"b": v}),
            ((X32, v), {"b": v}),
        ]:
            assert _same(f(*args, **kw), cf(*args, **kw)), (v, args, kw)


def test_compile_learning_rate_set_outside_changes_every_call():
    def run(compiled):
        p = tt.nn.Parameter(np.linspace(-1, 1, 4))
        opt = tt.optim.SGD([p], lr=0.1, momentum=0.9)
        vg = tt.value_and_grad(lambda q: tt.sum(q**2 * 3))
        step = tt.compile(vg) if compiled else vg
        out = []
        for lr in _sched([0.1, 0.05, 0.2, 0.01], n=42):
            loss, g = step(p.data)
            p.grad = g
            opt.param_groups[0]["lr"] = lr
            opt.step()
            out.append((_arr(loss), p.data.copy()))
        return out

    assert _same(run(False), run(True))


def test_compile_store_into_closed_list_is_refused():
    """Documented refusal: Python state f changes while recorded (a list it appends to)."""
    seen = []

    def f(a):
        seen.append(a)
        return X64 * seen[-1]

    with pytest.raises(RuntimeError, match="changed Python state"):
        tt.compile(f)(0.5)


def test_compile_set_attribute_follows_eager():
    """`box.t = a` of a number argument: Python state f changes, the same on a second
    recording (recorded again, the number a key), so box.t and the results are eager's."""
    class Box:
        t = 1.0

    box = Box()

    def f(a):
        box.t = a
        return X64 * box.t

    g = tt.compile(f)
    for a in _sched([0.5, 0.7, 0.5], n=6):
        box.t = 1.0
        got = _arr(g(a))
        assert box.t == a
        np.testing.assert_array_equal(got, _arr(f(a)))


def test_compile_returns_closed_over_tensor_unchanged():
    x = tt.tensor(np.arange(1, 5, dtype=np.float64))

    def f(a):
        return a / x + x / a if a != 0 else x

    assert _eager_vs_compiled(f, [(v,) for v in _sched([0.5, 1.5, 0.0, 2.0], n=42)]) is None


@pytest.mark.parametrize("case", ["np32_mul", "np64_add", "np_exp_of_float"])
def test_compile_returned_numpy_scalar_keeps_its_type(case):
    fn, vals = {
        "np32_mul": (lambda a: a * 2, [np.float32(0.5), np.float32(1.5), np.float32(-0.0), np.float32(3)]),
        "np64_add": (lambda a: a + 1.0, [np.float64(0.5), np.float64(1.5), np.float64(-0.0), np.float64(3)]),
        "np_exp_of_float": (lambda a: np.exp(a), [0.5, 1.5, -0.0, 3.0]),
    }[case]
    assert _eager_vs_compiled(fn, [(v,) for v in _sched(vals, n=12)]) is None


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_compile_learning_rate_set_inside(opt_name):
    def run(compiled):
        p = tt.nn.Parameter(np.linspace(-1, 1, 4))
        opt = getattr(tt.optim, opt_name)([p], lr=0.1)

        def f(lr):
            opt.zero_grad()
            loss = tt.sum(p**2 * 3)
            loss.backward()
            for g in opt.param_groups:
                g["lr"] = lr
            opt.step()
            return loss

        g = tt.compile(f) if compiled else f
        return [(_arr(g(lr)), p.data.copy()) for lr in _sched([0.1, 0.05, 0.2, 0.01], n=12)]

    assert _same(run(False), run(True))


# --------------------------------------------------------------------------------------------
# 2. odeint / solve_ivp against SciPy
# --------------------------------------------------------------------------------------------

T = np.linspace(0, 2, 6)

ODE_CASES = {
    # name: (tinytensor rhs, numpy rhs, y0, t, args, options)
    "decay_args": (lambda y, t, k: -k * y, lambda y, t, k: -k * y, np.array([1.0, 2.0]), T, (0.7,), {}),
    "lotka_volterra": (
        lambda y, t, a: tt.stack([a[0] * y[0] - a[1] * y[0] * y[1], -a[2] * y[1] + a[3] * y[0] * y[1]]),
        lambda y, t, a: np.array([a[0] * y[0] - a[1] * y[0] * y[1], -a[2] * y[1] + a[3] * y[0] * y[1]]),
        np.array([10.0, 5.0]),
        T,
        (np.array([1.0, 0.1, 1.5, 0.075]),),
        {},
    ),
    "where": (
        lambda y, t: tt.where(y > 0.5, -y, -2 * y),
        lambda y, t: np.where(y > 0.5, -y, -2 * y),
        np.array([1.0, 0.3]),
        T,
        (),
        {},
    ),
    "maximum": (
        lambda y, t: tt.maximum(y, 0.4) * -1.0,
        lambda y, t: np.maximum(y, 0.4) * -1.0,
        np.array([1.0, 0.3]),
        T,
        (),
        {},
    ),
    "abs": (lambda y, t: -abs(y - 0.5), lambda y, t: -np.abs(y - 0.5), np.array([1.0, 0.3]), T, (), {}),
    "relu": (
        lambda y, t: -tt.relu(y - 0.5) - 0.1,
        lambda y, t: -np.maximum(y - 0.5, 0) - 0.1,
        np.array([1.0, 0.3]),
        T,
        (),
        {},
    ),
    "exp": (lambda y, t: -tt.exp(y) * 0.1, lambda y, t: -np.exp(y) * 0.1, np.array([1.0, 0.3]), T, (), {}),
    "sin_t": (lambda y, t: tt.sin(t) * y, lambda y, t: np.sin(t) * y, np.array([1.0, 0.3]), T, (), {}),
    "log_goes_negative": (lambda y, t: tt.log(y), lambda y, t: np.log(y), np.array([1.0, 0.3]), T, (), {}),
    "division_by_zero_mid_solve": (
        lambda y, t: 1.0 / (y - 0.5),
        lambda y, t: 1.0 / (y - 0.5),
        np.array([1.0, 0.3]),
        T,
        (),
        {},
    ),
    "division_by_zero_in_t": (
        lambda y, t: y / (t - 1.0),
        lambda y, t: y / (t - 1.0),
        np.array([1.0, 0.3]),
        T,
        (),
        {},
    ),
    "int_y0": (lambda y, t: -y, lambda y, t: -y, np.array([1, 2]), T, (), {}),
    "float32_y0": (lambda y, t: -y, lambda y, t: -y, np.array([1, 2], dtype=np.float32), T, (), {}),
    "list_t": (lambda y, t: -y, lambda y, t: -y, np.array([1.0, 2.0]), [0.0, 0.5, 1.0], (), {}),
    "single_t": (lambda y, t: -y, lambda y, t: -y, np.array([1.0, 2.0]), np.array([0.0]), (), {}),
    "decreasing_t": (
        lambda y, t: -y,
        lambda y, t: -y,
        np.array([1.0, 2.0]),
        np.array([2.0, 1.0, 0.0]),
        (),
        {},
    ),
    "list_y0": (lambda y, t: -y, lambda y, t: -y, [1.0, 2.0], T, (), {}),
    "int_t": (lambda y, t: -y * t, lambda y, t: -y * t, np.array([1.0, 2.0]), np.array([0, 1, 2]), (), {}),
    "sum": (lambda y, t: -y * tt.sum(y), lambda y, t: -y * np.sum(y), np.array([1.0, 0.3, 0.2]), T, (), {}),
    "tanh_matmul": (
        lambda y, t, W: tt.tanh(W @ y),
        lambda y, t, W: np.tanh(W @ y),
        np.array([1.0, 0.3]),
        T,
        (np.array([[0.1, -1.0], [1.0, 0.2]]),),
        {},
    ),
    "pow_tight": (
        lambda y, t: -(y**3) + y**0.5,
        lambda y, t: -(y**3) + y**0.5,
        np.array([1.0, 0.3, 0.2]),
        T,
        (),
        {"rtol": 1e-10, "atol": 1e-10, "hmax": 0.05},
    ),
}


@pytest.mark.parametrize("name", sorted(ODE_CASES))
def test_odeint_is_scipys_bit_for_bit(name):
    tf, nf, y0, t, args, kw = ODE_CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = _arr(INT.odeint(tf, y0, t, args=args, **kw))
        s = si.odeint(nf, y0, t, args=args, **kw)
    assert r.dtype == s.dtype and r.shape == s.shape
    assert np.array_equal(r, s, equal_nan=True)


def test_odeint_scalar_y0_like_scipy():
    r = _arr(INT.odeint(lambda y, t: -y, 1.0, T))
    assert np.array_equal(r, si.odeint(lambda y, t: -y, 1.0, T))


def test_odeint_branch_on_state_value_is_refused():
    with pytest.raises(TypeError, match="Python number"):
        INT.odeint(lambda y, t: -y if float(y[0]) > 0.5 else -3 * y, np.array([1.0, 2.0]), T)


@pytest.mark.parametrize("method", ["RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA"])
@pytest.mark.parametrize(
    "case", ["oscillator_teval", "decay_args", "where", "log", "div0", "decreasing", "int_y0"]
)
def test_solve_ivp_is_scipys_bit_for_bit(method, case):
    tf, nf, span, y0, kw = {
        "oscillator_teval": (
            lambda t, y: tt.stack([y[1], -y[0] - 0.1 * y[1]]),
            lambda t, y: np.array([y[1], -y[0] - 0.1 * y[1]]),
            (0.0, 3.0),
            np.array([1.0, 0.0]),
            {"t_eval": np.linspace(0, 3, 7)},
        ),
        "decay_args": (
            lambda t, y, k: -k * y,
            lambda t, y, k: -k * y,
            (0.0, 3.0),
            np.array([1.0, 2.0]),
            {"args": (0.5,)},
        ),
        "where": (
            lambda t, y: tt.where(y > 0.5, -y, -2 * y),
            lambda t, y: np.where(y > 0.5, -y, -2 * y),
            (0.0, 2.0),
            np.array([1.0, 0.3]),
            {},
        ),
        "log": (lambda t, y: tt.log(y), lambda t, y: np.log(y), (0.0, 2.0), np.array([1.0, 0.3]), {}),
        "div0": (
            lambda t, y: 1.0 / (y - 0.5),
            lambda t, y: 1.0 / (y - 0.5),
            (0.0, 2.0),
            np.array([1.0, 0.3]),
            {},
        ),
        "decreasing": (
            lambda t, y: -y,
            lambda t, y: -y,
            (3.0, 0.0),
            np.array([1.0, 2.0]),
            {"t_eval": [3.0, 2.0, 0.5, 0.0]},
        ),
        "int_y0": (lambda t, y: -y, lambda t, y: -y, (0.0, 1.0), np.array([1, 2]), {}),
    }[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            s = si.solve_ivp(nf, span, y0, method=method, **kw)
        except ValueError as ex:  # Radau and BDF: "array must not contain infs or NaNs" (log case)
            with pytest.raises(type(ex), match=str(ex)):
                INT.solve_ivp(tf, span, y0, method=method, **kw)
            return
        r = INT.solve_ivp(tf, span, y0, method=method, **kw)
    ry = _arr(r.y)
    assert ry.dtype == s.y.dtype and ry.shape == s.y.shape
    assert np.array_equal(ry, s.y, equal_nan=True) and np.array_equal(_arr(r.t), s.t)
    assert (r.status, r.nfev) == (s.status, s.nfev)


@pytest.mark.parametrize("option", ["dense_output", "events", "vectorized"])
def test_solve_ivp_unsupported_options_are_refused(option):
    kw = {
        "dense_output": {"dense_output": True},
        "events": {"events": lambda t, y: y[0] - 0.5},
        "vectorized": {"vectorized": True},
    }[option]
    with pytest.raises(TypeError, match="not supported"):
        INT.solve_ivp(lambda t, y: -y, (0.0, 1.0), np.array([1.0, 2.0]), **kw)


@pytest.mark.parametrize(
    "style",
    ["tensor_data_general", "tensor_data_ieee", "global_number", "args_number_same_fn", "args_branch"],
)
def test_odeint_changes_between_calls(style):
    y0 = np.array([1.0, 2.0])
    k = tt.tensor(np.array([0.5, 1.0]))
    cfg = {"c": 0.5}
    fb = lambda y, t, c: -y if c > 1 else -2 * y  # noqa: E731
    fs = lambda y, t, c: -c * y * y  # noqa: E731
    for i, s in enumerate(_sched([1.0, 2.0, 3.0, 0.25], n=42)):
        if style == "tensor_data_general":
            k.data = np.array([0.5, 1.0]) * s
            r = INT.odeint(lambda y, t: -k * y + tt.sin(y) * 0.1, y0, T)
            e = si.odeint(lambda y, t: -k.data * y + np.sin(y) * 0.1, y0, T)
        elif style == "tensor_data_ieee":
            k.data = np.array([0.5, 1.0]) * s
            r = INT.odeint(lambda y, t: -k * y * y + 0.1, y0, T)
            e = si.odeint(lambda y, t: -k.data * y * y + 0.1, y0, T)
        elif style == "global_number":
            cfg["c"] = s
            r = INT.odeint(lambda y, t: -cfg["c"] * y, y0, T)
            e = si.odeint(lambda y, t: -cfg["c"] * y, y0, T)
        elif style == "args_number_same_fn":
            c = [0.5, 1.5, 2, np.float32(0.1)][[1.0, 2.0, 3.0, 0.25].index(s)]
            r = INT.odeint(fs, y0, T, args=(c,))
            e = si.odeint(fs, y0, T, args=(c,))
        else:
            c = [0.5, 1.5, 0.7, 3][[1.0, 2.0, 3.0, 0.25].index(s)]
            r = INT.odeint(fb, y0, T, args=(c,))
            e = si.odeint(fb, y0, T, args=(c,))
        assert np.array_equal(_arr(r), e), (style, i)


def test_compiled_odeint_with_number_argument():
    cf = tt.compile(lambda c: tt.sum(INT.odeint(lambda y, t, c: -c * y, np.array([1.0, 2.0]), T, args=(c,))))
    for c in _sched([0.5, 1.5, 2.5, 0.1], n=42):
        assert _arr(cf(c)) == si.odeint(lambda y, t, c: -c * y, np.array([1.0, 2.0]), T, args=(c,)).sum()


def _central(fun, x, h=1e-6):
    x = np.array(x, dtype=float)
    g = np.zeros_like(x)
    for j in range(x.size):
        e = np.zeros_like(x)
        e.flat[j] = h
        g.flat[j] = (fun(x + e) - fun(x - e)) / (2 * h)
    return g


def _lv_rhs(y, t, th):
    return tt.stack([th[0] * y[0] - th[1] * y[0] * y[1], -th[2] * y[1] + th[3] * y[0] * y[1]])


def _grad_case(case):
    tight = {"rtol": 1e-10, "atol": 1e-10}
    if case == "args":
        return (
            lambda th: tt.sum(INT.odeint(_lv_rhs, np.array([1.0, 0.5]), T, args=(th,), **tight) ** 2),
            np.array([1.0, 0.5, 0.8, 0.3]),
        )
    if case == "closure":
        return (
            lambda th: tt.sum(
                INT.odeint(lambda y, t: _lv_rhs(y, t, th), np.array([1.0, 0.5]), T, **tight) ** 2
            ),
            np.array([1.0, 0.5, 0.8, 0.3]),
        )
    if case == "y0_abs":
        return (
            lambda y0: tt.sum(
                INT.odeint(lambda y, t: -tt.abs(y) * 0.5 + tt.maximum(y, 0.2), y0, T, **tight) ** 2
            ),
            np.array([0.5, 0.3]),
        )
    if case == "t_increasing":
        return (
            lambda tv: tt.sum(INT.odeint(lambda y, t: -y * y, np.array([1.0, 2.0]), tv, **tight)),
            np.array([0.0, 0.5, 1.0]),
        )
    if case == "t_decreasing":
        return (
            lambda tv: tt.sum(INT.odeint(lambda y, t: -0.5 * y, np.array([1.0, 2.0]), tv, **tight)),
            np.array([1.0, 0.5, 0.0]),
        )
    if case == "args_decreasing_t":
        return (
            lambda th: tt.sum(
                INT.odeint(
                    lambda y, t, th: -th * y + 0.1 * y * y,
                    np.array([1.0, 2.0]),
                    np.array([1.0, 0.5, 0.0]),
                    args=(th,),
                    **tight,
                )
            ),
            np.array([0.7, 1.3]),
        )
    method = case.split("_", 1)[1]
    return (
        lambda th: tt.sum(
            INT.solve_ivp(
                lambda t, y, th: -th * y * y,
                (0.0, 2.0),
                np.array([1.0, 2.0]),
                t_eval=[0.5, 2.0],
                args=(th,),
                method=method,
                **tight,
            ).y
        ),
        np.array([0.7, 1.3]),
    )


@pytest.mark.parametrize(
    "case",
    [
        "args",
        "closure",
        "y0_abs",
        "t_increasing",
        "t_decreasing",
        "args_decreasing_t",
        "ivp_RK45",
        "ivp_DOP853",
        "ivp_Radau",
        "ivp_BDF",
        "ivp_LSODA",
    ],
)
def test_ode_gradient_vs_central_differences(case):
    L, x0 = _grad_case(case)
    g = _arr(tt.grad(L)(x0))
    n = _central(lambda x: float(_arr(L(x))), x0)
    assert np.max(np.abs(g - n)) <= 1e-6 * np.max(np.abs(n))


def test_ode_gradient_closure_equals_args():
    La, x0 = _grad_case("args")
    Lc, _ = _grad_case("closure")
    assert np.array_equal(_arr(tt.grad(La)(x0)), _arr(tt.grad(Lc)(x0)))


def test_ode_gradient_float32_y0_keeps_dtype():
    g = tt.grad(lambda y0: tt.sum(INT.odeint(lambda y, t: -y * y, y0, np.array([0.0, 1.0]))))(
        np.array([1.0, 2.0], dtype=np.float32)
    )
    assert _arr(g).dtype == np.float32
    np.testing.assert_allclose(_arr(g), [1 + 1 / 4, 1 + 1 / 9], rtol=1e-5)  # rows t=0 and t=1


@pytest.mark.parametrize("mode", ["grad_y0", "grad_args", "jvp"])
def test_ode_single_time_point_derivative(mode):
    t1 = np.array([0.3])
    if mode == "grad_y0":
        g = tt.grad(lambda y0: tt.sum(INT.odeint(lambda y, t: -y, y0, t1)))(np.array([1.0, 2.0]))
        assert np.array_equal(_arr(g), [1.0, 1.0])
    elif mode == "grad_args":
        g = tt.grad(
            lambda k: tt.sum(INT.odeint(lambda y, t, k: -k * y, np.array([1.0, 2.0]), t1, args=(k,)))
        )(np.array(0.5))
        assert _arr(g) == 0.0
    else:
        _, tangent = tt.jvp(
            lambda y0: INT.odeint(lambda y, t: -y, y0, t1), (np.array([1.0, 2.0]),), (np.array([1.0, 0.0]),)
        )
        assert np.array_equal(_arr(tangent), [[1.0, 0.0]])


@pytest.mark.xfail(
    strict=True,
    reason=(
        "not equal to central differences (0.0305 against 0.0611: a factor 2, the ratio of the two "
        "slopes; the jump term is missing) when "
        "the state crosses a tt.where switch: L(y0) = sum(odeint(lambda y, t: tt.where(y > 0.6, -y, "
        "-2 * y), y0, [0, 2])[-1]) at y0 = [1.0, 0.3]. The sensitivity is the pathwise one (JAX's odeint "
        "gives the same and ignores the crossing); no warning is given. Without a crossing (y0 = [0.5, "
        "0.3]) it matches."
    ),
)
def test_ode_gradient_through_where_crossing_vs_central_differences():
    def L(y0):
        return tt.sum(
            INT.odeint(
                lambda y, t: tt.where(y > 0.6, -y, -2 * y), y0, np.array([0.0, 2.0]), rtol=1e-12, atol=1e-12
            )[-1]
        )

    x0 = np.array([1.0, 0.3])
    g = _arr(tt.grad(L)(x0))
    n = _central(lambda x: float(_arr(L(x))), x0)
    assert np.max(np.abs(g - n)) <= 1e-4 * np.max(np.abs(n))


# --------------------------------------------------------------------------------------------
# 3. DistributedDataParallel under mpiexec -n 2
# --------------------------------------------------------------------------------------------

MPIEXEC = shutil.which("mpiexec") or (
    os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(os.path.join(os.path.dirname(sys.executable), "mpiexec"))
    else None
)
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is missing (pip install -e '.[distributed]')")

WORKER = textwrap.dedent("""
    import sys, numpy as np, tinytensor as tt
    dist = tt.distributed
    dist.init()
    mode, out = sys.argv[1], sys.argv[2]
    r = dist.rank()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3)); Y = rng.standard_normal((40, 2))

    def grads(ps):
        return [np.array(p.grad.data if isinstance(p.grad, tt.Tensor) else p.grad, copy=True) for p in ps]

    def run(scen):
        m = tt.nn.Sequential(tt.nn.Linear(3, 8, rng=0), tt.nn.Tanh(), tt.nn.Linear(8, 2, rng=1))
        ddp = m if mode == "one" else tt.nn.parallel.DistributedDataParallel(m, allreduce=mode)
        ps = list(ddp.parameters())
        opt = tt.optim.SGD(ps, lr=0.1, momentum=0.9)
        rec, kept = [], []
        for step in range(4):
            opt.zero_grad()
            if mode == "one":   # the mean over the two ranks' halves, in one process
                acc = None
                for k in range(2):
                    for p in ps:
                        p.grad = None
                    lo = 8 * step + 4 * k
                    xb, yb = X[lo: lo + 4], Y[lo: lo + 4]
                    if scen == "accum":
                        tt.mean((m(xb[:2]) - yb[:2]) ** 2).backward()
                        tt.mean((m(xb[2:]) - yb[2:]) ** 2).backward()
                    else:
                        tt.mean((m(xb) - yb) ** 2).backward()
                    g = [a / 2 for a in grads(ps)]
                    acc = g if acc is None else [a + b for a, b in zip(acc, g)]
                for p, a in zip(ps, acc):
                    p.grad = a   # .grad is an ndarray here
            else:
                xb = X[8 * step + 4 * r: 8 * step + 4 * r + 4]; yb = Y[8 * step + 4 * r: 8 * step + 4 * r + 4]
                if scen == "accum":
                    with ddp.no_sync():
                        tt.mean((ddp(xb[:2]) - yb[:2]) ** 2).backward()
                    tt.mean((ddp(xb[2:]) - yb[2:]) ** 2).backward()
                else:
                    tt.mean((ddp(xb) - yb) ** 2).backward()
            rec += grads(ps)
            if scen == "keep":
                kept.append((grads(ps), [p.grad for p in ps]))
            opt.step()
        rec += [np.array(p.data, copy=True) for p in ps]
        bad = sum(not np.array_equal(c, np.asarray(g.data if isinstance(g, tt.Tensor) else g))
                  for copies, held in kept for c, g in zip(copies, held))
        return rec, bad

    res = {}
    for scen in ["basic", "accum", "keep"]:
        rec, bad = run(scen)
        for i, a in enumerate(rec):
            res[f"{scen}_{i}"] = a
        res[f"{scen}_keptbad"] = np.array(bad)
    np.savez(f"{out}_{r}.npz", **res)
""")

EDGE = textwrap.dedent("""
    import sys, numpy as np, tinytensor as tt
    dist = tt.distributed
    dist.init()
    r = dist.rank()
    m = tt.nn.Linear(3, 2, rng=0)
    if sys.argv[1] == "different":
        try:
            tt.nn.parallel.DistributedDataParallel(m, allreduce=["shared", "mpi"][r])
            print(f"rank {r}: no error", flush=True)
        except RuntimeError as ex:
            print(f"rank {r}: raised: {ex}", flush=True)
        sys.exit(0)
    ddp = tt.nn.parallel.DistributedDataParallel(m, allreduce=sys.argv[2])
    x = np.random.default_rng(r).standard_normal((4, 3))
    tt.mean(ddp(x) ** 2).backward()
    if r == 1:
        sys.exit(0)
    tt.mean(ddp(x) ** 2).backward()
    print("rank 0 passed the second backward", flush=True)
""")


def _launch(tmp_path, script, args, n=2):
    path = tmp_path / "script.py"
    path.write_text(script)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [os.path.dirname(os.path.dirname(os.path.abspath(tt.__file__)))]
            + [p for p in [os.environ.get("PYTHONPATH")] if p]
        ),
    )
    cmd = ["timeout", "60"] + ([MPIEXEC, "-n", str(n)] if n else []) + [sys.executable, str(path)] + args
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=90)


@pytest.fixture(scope="module")
def ddp_results(tmp_path_factory):
    if MPIEXEC is None:
        pytest.skip("mpiexec is missing (pip install -e '.[distributed]')")
    tmp = tmp_path_factory.mktemp("ddp")
    out = {}
    for mode in ["auto", "shared", "mpi", "one"]:
        p = _launch(tmp, WORKER, [mode, str(tmp / mode)], n=0 if mode == "one" else 2)
        assert p.returncode == 0, p.stderr[-2000:]
        ranks = [0] if mode == "one" else [0, 1]
        out[mode] = [dict(np.load(tmp / f"{mode}_{r}.npz")) for r in ranks]
    return out


def _equal_dicts(a, b, prefix):
    keys = [k for k in a if k.startswith(prefix)]
    return keys and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in keys)


@needs_mpi
@pytest.mark.parametrize("scen", ["basic", "accum", "keep"])
@pytest.mark.parametrize("mode", ["auto", "shared", "mpi"])
def test_ddp_settings_equal_each_other_and_one_process(ddp_results, mode, scen):
    r0, r1 = ddp_results[mode]
    assert _equal_dicts(r0, r1, scen)  # the replicas agree
    assert _equal_dicts(r0, ddp_results["mpi"][0], scen)  # shared memory == MPI, bit for bit
    if scen != "keep":  # and == one process (2 ranks: exact)
        assert _equal_dicts(
            {k: v for k, v in r0.items() if not k.endswith("keptbad")}, ddp_results["one"][0], scen
        )
    assert int(r0[f"{scen}_keptbad"]) == 0 and int(r1[f"{scen}_keptbad"]) == 0  # kept .grad keep values


@needs_mpi
def test_ddp_ranks_with_different_settings_raise_on_every_rank(tmp_path):
    p = _launch(tmp_path, EDGE, ["different"])
    assert p.returncode == 0, p.stderr[-2000:]
    # the two ranks' lines may come interleaved from mpiexec, so count rather than split
    assert "rank 0: raised:" in p.stdout and "rank 1: raised:" in p.stdout and "no error" not in p.stdout, (
        p.stdout
    )
    assert p.stdout.count("allreduce='shared'") == 2 and p.stdout.count("allreduce='mpi'") == 2, p.stdout


@needs_mpi
@pytest.mark.parametrize("mode", ["shared", "mpi"])
def test_ddp_rank_that_exits_early_aborts_the_job(tmp_path, mode):
    p = _launch(tmp_path, EDGE, ["exit", mode])
    assert p.returncode not in (0, 124), (p.returncode, p.stderr[-2000:])
    assert "rank 0 passed the second backward" not in p.stdout
    assert "which ended" in p.stderr + p.stdout


def test_sgd_momentum_accepts_tensor_grad():
    p = tt.nn.Parameter(np.ones(3))
    q = tt.nn.Parameter(np.ones(3))
    opt_p = tt.optim.SGD([p], lr=0.1, momentum=0.9)
    opt_q = tt.optim.SGD([q], lr=0.1, momentum=0.9)
    for _ in range(3):
        p.grad = tt.tensor(np.full(3, 0.5))
        q.grad = np.full(3, 0.5)
        opt_p.step()
        opt_q.step()
    assert np.array_equal(p.data, q.data)
