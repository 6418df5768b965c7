"""Issue 29: a number argument of a compiled function is an input of the program, not a cache key.

A Python float or int (a NumPy float or int scalar) passed to `tt.compile(f)` is handed to f, while
it is recorded, as a tracked number (tinytensor/compile/tracer.py, `_Number`): used as an operand of
a tinytensor operation it is an input of the program, which runs that operation on the call's
number itself (NEP 50's weak scalars as eagerly); any use the program cannot replay (a branch, a
conversion, a shape, an index, an f-string, a dict key, math.*, NumPy) makes that argument part of
the cache key again, for that function. Every case here compares every call with f run eagerly,
bit for bit (values, dtypes, the sign of a zero, NaN), and counts the recordings.
"""

import math
import warnings

import numpy as np
import pytest

import tinytensor as tt


def _same(a, b):
    if isinstance(a, tt.Tensor):
        a = a.data
    if isinstance(b, tt.Tensor):
        b = b.data
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) in (int, float, bool) or type(b) in (int, float, bool):
        return type(a) is type(b) and (a == b or a != a and b != b) and str(a) == str(b)
    a, b = np.asarray(a), np.asarray(b)
    return (a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
            and np.array_equal(np.signbit(a), np.signbit(b)))


def _check(f, calls, traces=None):
    """Call f eagerly and compiled on each (args, kwargs) of `calls`; every result the same."""
    g = tt.compile(f)
    for i, (args, kwargs) in enumerate(calls):
        want = f(*args, **kwargs)
        got = g(*args, **kwargs)
        assert _same(got, want), f"call {i + 1}: compiled {got!r}, eager {want!r}"
    if traces is not None:
        assert g.traces == traces, g.recompiles
    return g


def _x(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("k", [3, 10, 40])
def test_a_number_that_changes_on_call_k_is_an_input(k):
    x, gr = _x(3), _x(3, seed=1)
    calls = [((x, gr, 0.1 if i < k - 1 else 0.05 * (1 + math.cos(i))), {}) for i in range(k + 2)]
    _check(lambda w, g, lr: w - lr * g, calls, traces=1)


def test_a_cosine_schedule_records_once_and_its_program_reads_the_number():
    g = _check(lambda w, g, lr: w - lr * g,
               [((_x(3), _x(3, seed=1), 0.05 * (1 + math.cos(math.pi * i / 40))), {}) for i in range(40)],
               traces=1)
    assert "lr" in g.source.splitlines()[0]            # an argument of the program


def test_a_number_in_a_tensor_op_and_in_a_branch_is_a_key():
    def f(x, lr):
        y = x * lr
        return y if lr > 0.5 else y - lr
    g = _check(f, [((_x(3), [0.3, 0.7][i % 2]), {}) for i in range(8)], traces=2)
    assert "part of the cache key" in g.recompiles[0] and "comparison" in g.recompiles[0]


def test_a_number_derived_by_python_arithmetic_then_branched_on_is_a_key():
    def f(x, lr):
        decay = 1 - lr * 0.5
        return x * decay if decay < 0.8 else x
    _check(f, [((_x(3), [0.2, 0.6, 0.2, 0.6][i]), {}) for i in range(4)], traces=2)


def test_python_arithmetic_on_numbers_is_replayed():
    _check(lambda w, hp: w * (1 - hp["lr"]) ** 2 - abs(-hp["wd"]) / 3 * w,
           [((_x(3), {"lr": 0.1 + 0.01 * i, "wd": 1e-3 * i}), {}) for i in range(6)], traces=1)


@pytest.mark.parametrize("use", ["cos", "int", "range", "fstring", "dict_key", "round", "shape", "zeros"])
def test_a_use_the_program_cannot_replay_makes_the_number_a_key(use):
    def f(x, n):
        if use == "cos":
            return x * math.cos(n)
        if use == "int":
            return x * int(n)
        if use == "range":
            for _ in range(n):
                x = x * 2
            return x
        if use == "fstring":
            return x * float(f"{n:.3f}")
        if use == "dict_key":
            return x * {1: 2.0, 2: 3.0, 3: 5.0}[n]
        if use == "round":
            return x * round(n)
        if use == "shape":
            return x.reshape(n, -1).sum(axis=0)
        return x.sum() + tt.tensor(np.zeros(n)).sum()
    ints = use in ("range", "dict_key", "shape", "zeros")
    values = [1, 2, 3, 1, 2] if ints else [1.25, 2.5, 3.75, 1.25, 2.5]
    x = _x(6)
    _check(f, [((x, v), {}) for v in values], traces=3)


def test_a_bool_argument_stays_a_key():
    def f(x, training):
        return x * 2 if training else x - 1
    g = _check(f, [((_x(3), i % 2 == 0), {}) for i in range(6)], traces=2)
    assert "<class 'bool'>, True" in g.recompiles[0] or "bool" in str(list(g.programs))


def test_an_int_argument_used_as_an_index():
    x = _x(5, 3)
    _check(lambda x, i: x[i] * 2, [((x, i), {}) for i in [0, 1, 2, 0, 4]], traces=4)


def test_an_int_argument_as_an_operand_is_an_input():
    _check(lambda x, s: x * s + s, [((_x(3), i), {}) for i in range(12)], traces=1)


def test_int_and_float_arguments_give_eager_dtypes():
    xi = np.arange(3)
    _check(lambda x, s: tt.tensor(x) * s, [((xi, 2), {}), ((xi, 2.5), {}), ((xi, 3), {}), ((xi, 0.5), {})],
           traces=2)


def test_weak_and_strong_scalars_as_eagerly():
    x32, x16 = _x(3, dtype=np.float32), _x(3, dtype=np.float16)
    calls = [((x32, 0.1), {}), ((x32, np.float64(0.1)), {}), ((x32, np.float32(0.2)), {}),
             ((x16, np.float32(0.2)), {}), ((x16, 0.3), {}), ((x32, 0.7), {}), ((x32, np.float64(0.9)), {})]
    _check(lambda x, s: tt.tensor(x) * s, calls, traces=5)        # float32 * np.float64 stays float32
    _check(lambda x, s: tt.mul(tt.tensor(x), s), calls, traces=5)   # tt.mul: NumPy's rule
    _check(lambda x, s: np.multiply(s, tt.tensor(x)), calls, traces=5)   # a Tensor's ufunc: weak
    _check(lambda x, s: np.maximum(tt.tensor(x), s), calls, traces=5)


def test_np_float64_and_python_float_are_two_programs_with_eager_numbers():
    x = _x(3, dtype=np.float32)
    _check(lambda x, s: np.float64(2.0) * s * tt.tensor(x),
           [((x, 0.5), {}), ((x, np.float64(0.5)), {}), ((x, 0.25), {}), ((x, np.float64(0.125)), {})],
           traces=2)


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_signed_zeros_and_nan():
    x = np.array([1.0, -2.0, 0.0])
    _check(lambda x, s: (x * s, 1.0 / (x * 0 + s)),
           [((x, s), {}) for s in (0.0, -0.0, 0.0, float("nan"), -0.0, 1.5)], traces=1)


def test_a_number_passed_to_a_nested_compiled_function():
    inner = tt.compile(lambda x, s: x * s)
    outer = tt.compile(lambda x, s: inner(x, s) + s / 2)
    x = _x(3)
    for i in range(6):
        s = 0.1 * i + 0.05
        assert _same(outer(x, s), x * s + s / 2)
    assert outer.traces == 1


def test_grad_and_value_and_grad_of_a_compiled_function_with_a_float_argument():
    h = tt.compile(lambda w, lr: ((w * lr) ** 2).sum())
    eager = lambda w, lr: ((w * lr) ** 2).sum()      # noqa: E731
    w = _x(4)
    for lr in (0.1, 0.2, 0.35):
        assert _same(tt.grad(h)(w, lr), tt.grad(eager)(w, lr))
        v, gw = tt.value_and_grad(h)(w, lr)
        ve, ge = tt.value_and_grad(eager)(w, lr)
        assert _same(v, ve) and _same(gw, ge)


def test_value_and_grad_inside_with_a_float_learning_rate():
    def step(w, x, lr):
        v, gr = tt.value_and_grad(lambda w_: ((x @ w_) ** 2).mean())(w)
        return v, w - lr * gr
    _check(step, [((_x(3, 2), _x(4, 3, seed=i), 0.1 / (i + 1)), {}) for i in range(6)], traces=1)


def test_a_returned_number_is_the_calls_own():
    g = _check(lambda x, s: (x * s, s * 2), [((_x(3), 0.5 + i), {}) for i in range(3)], traces=3)
    assert type(g(_x(3), 0.25)[1]) is float


def test_a_number_stored_by_f_is_put_back_as_a_plain_number():
    box = {}

    def f(x, t):
        box["t"] = t
        return x * t
    g = tt.compile(f)
    try:
        out = g(_x(3), 0.5)
    except RuntimeError as err:                    # refused: f changed state it reads, and the
        assert "call it uncompiled" in str(err)    # refusal leaves no trace of the call
        assert box == {}
    else:
        assert _same(out, _x(3) * 0.5)
        assert type(box["t"]) is float and box["t"] == 0.5


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_an_optimizer_lr_set_from_the_argument_inside_the_step(opt_name):
    """`for g in opt.param_groups: g["lr"] = lr` inside a compiled step: equal to eager on every
    call, or refused naming the fix; the learning rate left in the group is a plain float."""
    def make():
        m = tt.nn.Linear(3, 2, rng=0, dtype=np.float64)
        opt = getattr(tt.optim, opt_name)(m.parameters(), lr=0.01)

        def step(x, y, lr):
            for group in opt.param_groups:
                group["lr"] = lr
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return m, opt, step

    m_e, opt_e, step_e = make()
    m_c, opt_c, step_c = make()
    g = tt.compile(step_c)
    for i in range(6):
        x, y, lr = _x(4, 3, seed=i), _x(4, 2, seed=10 + i), 0.01 * (i + 1)
        want = step_e(x, y, lr)
        try:
            got = g(x, y, lr)
        except RuntimeError as err:
            assert "uncompiled" in str(err) or "outside the compiled function" in str(err)
            break
        assert _same(got, want)
        assert _same(m_c.weight, m_e.weight) and _same(m_c.bias, m_e.bias)
    assert all(type(group["lr"]) is float for group in opt_c.param_groups)


def test_a_number_in_a_keyword_parameter_is_a_key():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(lambda x, p: tt.nn.functional.leaky_relu(tt.tensor(x), p),
               [((_x(5), s), {}) for s in (0.1, 0.2, 0.1)], traces=2)


def test_isinstance_of_a_number_argument_holds_while_recording():
    def f(x, lr):
        assert isinstance(lr, float) and not isinstance(lr, tt.Tensor)
        return x * lr
    _check(f, [((_x(3), 0.1 * i), {}) for i in range(3)], traces=1)


def test_a_float_argument_of_a_call_on_the_tape():
    """Results on the tape (a closed-over model's parameters require grad): the float is an input
    of the forward program and the backward one reads what it saved."""
    def make():
        m = tt.nn.Linear(3, 2, rng=0, dtype=np.float64)
        return m, (lambda x, s: ((m(x) * s) ** 2).sum() / s)
    m_e, f_e = make()
    m_c, f_c = make()
    g = tt.compile(f_c)
    for i in range(5):
        x, s = _x(4, 3, seed=i), 0.3 + 0.2 * i
        want, got = f_e(x, s), g(x, s)
        want.backward()
        got.backward()
        assert _same(got, want)
        assert _same(m_c.weight.grad, m_e.weight.grad) and _same(m_c.bias.grad, m_e.bias.grad)
    assert g.traces == 1


def test_a_number_argument_costs_no_recording_past_the_first():
    g = tt.compile(lambda w, g, t, lr: tt.softmax(w / t) - lr * g)
    for i in range(50):
        g(_x(4), _x(4, seed=1), 0.5 + i / 50, 0.05 * (1 + math.cos(math.pi * i / 50)))
    assert g.traces == 1 and len(g.programs) == 1


def test_code_that_needs_an_exact_float_records_again_with_numbers_as_keys():
    """C code that takes exact numbers only (json, a NumPy seed) raises TypeError on a tracked
    number before anything was written or drawn: recorded again with the numbers as they are."""
    import json

    def f(x, s):
        return x * s + len(json.dumps(s))
    g = _check(f, [((_x(3), s), {}) for s in (0.5, 0.25, 0.5)], traces=2)
    assert "recorded again with its number arguments as keys" in g.recompiles[0]


def test_type_of_a_number_argument_is_eagers():
    """`type(lr) is float` cannot be answered by a tracked number: a function whose code calls
    type() gets its numbers as they are (keys)."""
    def f(x, s):
        return x * s if type(s) is float else x - s
    _check(f, [((_x(3), s), {}) for s in (0.5, 2, 0.25, 0.5, 2)], traces=3)


def test_an_error_of_fs_own_keeps_numbers_tracked_afterwards():
    g = tt.compile(lambda x, s: x @ x * s)
    with pytest.raises(ValueError):
        g(_x(2, 3), 0.5)                    # f's own error (shapes), raised as eagerly
    for s in (0.5, 0.25, 0.125):
        assert _same(g(_x(3), s), _x(3) @ _x(3) * s)
    assert g.traces == 1


def test_a_pickled_or_copied_number_is_a_key():
    from copy import deepcopy
    from pickle import dumps, loads  # (the module itself: draws.generators_in trips on it)
    _check(lambda x, s: x * loads(dumps(s)) + deepcopy(s),
           [((_x(3), s), {}) for s in (0.5, 0.25, 0.5)], traces=2)


def test_numpy_on_a_number_and_arrays_is_a_line_of_the_program():
    held = np.linspace(-1.0, 1.0, 3)
    _check(lambda x, s: x + held * s, [((_x(3), 0.1 * i), {}) for i in range(5)], traces=1)
    _check(lambda x, t: x * (x > t), [((_x(3), t), {}) for t in (-0.5, 0.0, 0.5, 1.0)], traces=1)
    _check(lambda x, s: x * np.exp(-s), [((_x(3), 0.1 * i), {}) for i in range(5)], traces=1)
