"""Issue 7: errors point at the user's code.

* `tt.detect_anomaly()`: the first NaN/Inf in a forward value, a gradient or a tangent raises
  FloatingPointError naming the tape entry (op, input names and shapes) and the line of user
  code that recorded it; disabled, it costs nothing (no check runs, a NaN passes silently).
* Errors raised while recording name the op and its operands (names, shapes, dtypes).
* An error inside a VJP/JVP rule during a sweep names the tape entry it came from.
"""

import inspect
import os

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import tape

THIS_FILE = os.path.basename(__file__)

def next_line():
    """The line number just after the caller's line."""
    return inspect.currentframe().f_back.f_lineno + 1


# ----- detect_anomaly: forward values ---------------------------------------------------------------
def test_anomaly_in_a_forward_value_names_the_entry_and_the_user_line():
    x = tt.tensor([1.0, 600.0], requires_grad=True, name="x")
    with pytest.raises(FloatingPointError) as info, tt.detect_anomaly(), np.errstate(over="ignore"):
        a = x * 2.0                              # finite: passes
        a.name = "a"
        line = next_line()
        b = tt.exp(a)                            # exp(1200) = inf: the first non-finite value
        tt.sum(b)
    message = str(info.value)
    assert "exp(a (2,) float64)" in message
    assert "mul" not in message and "sum" not in message   # the first bad value, no other
    assert f"{THIS_FILE}:{line}" in message
    assert "b = tt.exp(a)" in message            # the source line itself


def test_anomaly_forward_value_of_a_scalar_entry():
    x = tt.tensor(-1.0, requires_grad=True, name="x")
    with pytest.raises(FloatingPointError, match=r"log\(x \(\) float64\).*" + THIS_FILE), \
            tt.detect_anomaly(), np.errstate(invalid="ignore"):
        tt.log(x)


# ----- detect_anomaly: gradients and tangents -----------------------------------------------------------
def _sqrt_at_zero(shape):
    x = tt.tensor(np.zeros(shape), requires_grad=True, name="x")
    with tt.detect_anomaly():
        line = next_line()
        r = tt.sqrt(x)                           # finite value 0, infinite derivative
        loss = tt.sum(r * 3.0)
    return x, loss, line


def _check_gradient_anomaly(shape):
    x, loss, line = _sqrt_at_zero(shape)
    with pytest.raises(FloatingPointError) as info, tt.detect_anomaly():
        loss.backward()
    message = str(info.value)
    assert "gradient" in message
    assert f"sqrt(x {shape} float64)" in message
    assert f"{THIS_FILE}:{line}" in message and "tt.sqrt(x)" in message
    assert x.grad is None                        # nothing was accumulated
    with pytest.raises(FloatingPointError, match="tangent") as info, tt.detect_anomaly():
        loss.jvp({x: np.ones(shape)})
    assert f"{THIS_FILE}:{line}" in str(info.value)


def test_anomaly_in_a_gradient_names_the_entry_and_the_user_line_scalar():
    _check_gradient_anomaly((1,))


def test_anomaly_in_a_gradient_names_the_entry_and_the_user_line():
    _check_gradient_anomaly((2, 3))


def test_anomaly_stops_at_the_first_infinite_gradient():
    """d/dx log(exp(x)) = 1, but at x = -745 exp(x) is the smallest subnormal and the engine, as
    PyTorch, computes 1/exp(x) = inf, then inf * exp(x) = inf. Anomaly mode stops at the log
    entry, where the first inf appears, and names the line that recorded it."""
    x = tt.tensor(-745.0, requires_grad=True, name="x")
    with tt.detect_anomaly():
        e = tt.exp(x)
        e.name = "e"
        line = next_line()
        y = tt.log(e)
    assert np.isfinite(y.data)
    with pytest.raises(FloatingPointError) as info, tt.detect_anomaly(), np.errstate(over="ignore"):
        y.backward()
    assert "log(e () float64)" in str(info.value) and f"{THIS_FILE}:{line}" in str(info.value)
    with np.errstate(over="ignore"):
        y.backward()                             # off: the inf passes through
    assert np.isinf(x.grad)
    # One step further, exp(-1000) underflows to 0 and the forward value log(0) = -inf is caught.
    with pytest.raises(FloatingPointError, match=r"forward value of log\(tensor \(\) float64\)"), \
            tt.detect_anomaly():
        tt.log(tt.exp(tt.tensor(-1000.0, requires_grad=True)))


def test_anomaly_without_a_recorded_site_still_names_the_entry():
    """Recorded outside detect_anomaly, the entry has no creation line (as in PyTorch, where the
    forward must run in anomaly mode for the traceback), but the op and inputs are named."""
    x = tt.tensor([0.0], requires_grad=True, name="x")
    loss = tt.sum(tt.sqrt(x))
    with pytest.raises(FloatingPointError, match=r"sqrt\(x \(1,\) float64\)") as info, \
            tt.detect_anomaly():
        loss.backward()
    assert "created at" not in str(info.value)


# ----- detect_anomaly: free when disabled ---------------------------------------------------------
def test_anomaly_mode_off_costs_nothing(monkeypatch):
    calls = []
    monkeypatch.setattr(tape, "_anomaly_check_forward", lambda *a: calls.append("forward"))
    monkeypatch.setattr(tape, "_anomaly_check_gradient", lambda *a, **k: calls.append("gradient"))
    monkeypatch.setattr(tape, "_user_frame", lambda: calls.append("frame") or "?")
    x = tt.tensor([np.nan, 1.0], requires_grad=True)
    y = tt.sum(tt.exp(x) * x)
    y.backward()
    tangent = y.jvp({x: np.ones(2)})
    assert calls == []                           # not one check, not one stack walk
    assert np.isnan(y.data) and np.isnan(x.grad[0]) and np.isnan(tangent)   # a NaN passes silently
    with tt.detect_anomaly():                    # and the spies are the ones the engine calls
        y = tt.sum(tt.exp(x) * x)
        y.backward()
    assert "forward" in calls and "gradient" in calls


def test_anomaly_mode_is_restored_after_an_error():
    x = tt.tensor([np.inf], requires_grad=True)
    with pytest.raises(FloatingPointError), tt.detect_anomaly():
        x * 1.0
    y = x * 1.0                                   # off again: no error
    assert np.isinf(y.data[0])
    with tt.detect_anomaly():
        with tt.detect_anomaly():
            pass
        with pytest.raises(FloatingPointError):   # still on after a nested block ends
            x * 1.0


def test_anomaly_mode_leaves_finite_computations_alone():
    x = tt.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
    with tt.detect_anomaly():
        loss = tt.softmax_cross_entropy(tt.tanh(x) * 2.0, np.array([0, 2]))
        loss.backward()
    expected = x.grad.copy()
    x.zero_grad()
    tt.softmax_cross_entropy(tt.tanh(x) * 2.0, np.array([0, 2])).backward()
    np.testing.assert_array_equal(x.grad, expected)


# ----- errors while recording -----------------------------------------------------------------------
W = tt.tensor(np.ones((2, 3)), requires_grad=True, name="W")


@pytest.mark.parametrize("call, error, parts", [
    (lambda: tt.tensor(np.ones((2, 3)), name="x") @ W, ValueError, ["matmul", "x (2, 3)", "W (2, 3)"]),
    (lambda: W + tt.tensor(np.ones(4), name="b"), ValueError, ["add", "W (2, 3)", "b (4,)"]),
    (lambda: tt.dot(W, tt.tensor(np.ones((3, 2, 2)), name="B")), ValueError,
     ["dot", "W (2, 3)", "B (3, 2, 2)"]),
    (lambda: tt.reshape(W, (4,)), ValueError, ["reshape", "W (2, 3)"]),
    (lambda: tt.sum(W, axis=5), ValueError, ["sum", "W (2, 3)"]),
    (lambda: tt.concatenate([W, tt.tensor(np.ones((2, 2)), name="v")]), ValueError,
     ["concatenate", "W (2, 3)", "v (2, 2)"]),
    (lambda: W[5], IndexError, ["getitem", "W (2, 3)"]),
    (lambda: tt.softmax_cross_entropy(W, np.array([0, 7])), IndexError, ["[0, 3)", "W (2, 3)"]),
    (lambda: tt.exp(tt.tensor(np.array(["a"]), name="s")), TypeError, ["exp", "s (1,) <U1"]),
    (lambda: W * tt.tensor(np.ones(3, np.float32), name="h"), None, None),    # fine: promotes
], ids=["matmul", "broadcast", "dot-3d", "reshape", "axis", "concatenate", "index", "labels",
        "dtype", "mixed-float"])
def test_recording_errors_name_the_op_and_the_operands(call, error, parts):
    if error is None:
        assert call().dtype == np.float64
        return
    with pytest.raises(error) as info:
        call()
    for part in parts:
        assert part in str(info.value), (part, str(info.value))


def test_a_dtype_error_while_recording_names_the_op():
    with pytest.raises(TypeError, match=r"add.*W \(2, 3\)"):
        W + np.array(["a", "b", "c"])


def test_creation_and_call_errors_are_clear():
    with pytest.raises(TypeError, match="only floating-point tensors can require gradients"):
        tt.tensor([1, 2], requires_grad=True)
    y = W * 2.0
    with pytest.raises(RuntimeError, match=r"\(2, 3\).*grad="):
        y.backward()
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 3\)"):
        y.backward(np.ones(3))
    with pytest.raises(ValueError, match=r"W.*\(2, 3\)"):
        y.jvp({W: np.ones(3)})


# ----- errors inside rules, during a sweep ---------------------------------------------------------
def test_an_error_in_a_vjp_rule_names_the_tape_entry(registry):
    @tt.primitive
    def scaled(x):
        return 2 * x

    def broken_vjp(g, ans, x):
        raise ValueError("the rule broke")
    scaled.defvjp(broken_vjp)
    scaled.defjvp(lambda t, ans, x: 1 / 0)
    out = scaled(W)
    out.name = "out"
    with pytest.raises(ValueError) as info:
        tt.sum(out).backward()
    message = str(info.value)
    assert "VJP rule" in message and "out = scaled(W (2, 3) float64)" in message
    assert "the rule broke" in message
    assert isinstance(info.value.__cause__, ValueError)       # the original, chained
    with pytest.raises(RuntimeError) as info:                  # any other type: RuntimeError
        out.jvp({W: np.ones((2, 3))})
    message = str(info.value)
    assert "JVP rule" in message and "scaled(W (2, 3) float64)" in message
    assert "ZeroDivisionError" in message
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert W.grad is None


def test_an_error_in_a_rule_deep_in_the_graph_names_that_entry(registry):
    @tt.primitive
    def fragile(x):
        return x + 0.0
    fragile.defvjp(lambda g, ans, x: g[:, :1, None])        # a wrong shape that cannot broadcast back
    fragile.defjvp(lambda t, ans, x: t)
    h = tt.tanh(fragile(tt.tanh(W)))
    loss = tt.sum(tt.softmax(h) * h)
    with pytest.raises(ValueError, match=r"VJP rule of tape entry fragile\(tensor \(2, 3\)"):
        loss.backward()


def test_a_missing_rule_is_named(registry):
    @tt.primitive
    def cube(x):
        return x ** 3
    cube.defvjp(lambda g, ans, x: 3 * x ** 2 * g)
    x = tt.tensor([1.0, 2.0], requires_grad=True, name="x")
    y = cube(x)
    y.backward(np.ones(2))
    np.testing.assert_array_equal(x.grad, [3, 12])
    with pytest.raises(NotImplementedError, match=r"cube.*JVP"):
        y.jvp({x: np.ones(2)})

    @tt.primitive
    def pick(x, k):
        return x * k
    pick.defvjp(lambda g, ans, x, k: g * k, None)
    pick.defjvp(lambda t, ans, x, k: t * k, None)
    k = tt.tensor([1.0, 1.0], requires_grad=True, name="k")
    with pytest.raises(NotImplementedError, match=r"pick.*not differentiable in input 1"):
        tt.sum(pick(x, k)).backward()


def test_a_jvp_rule_may_return_none_for_a_zero_tangent(registry):
    @tt.primitive
    def first_only(x, y):
        return x + 0 * y
    first_only.defvjp(lambda g, ans, x, y: g, lambda g, ans, x, y: None)
    first_only.defjvp(lambda t, ans, x, y: t, lambda t, ans, x, y: None)
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = tt.tensor([3.0, 4.0], requires_grad=True)
    out = first_only(x, y)
    out.backward(np.ones(2))
    assert y.grad is None                        # a None gradient: nothing accumulated
    np.testing.assert_array_equal(out.jvp({x: np.ones(2), y: np.ones(2)}), [1, 1])


def test_an_error_in_a_rule_names_the_line_that_recorded_it_under_anomaly_mode(registry):
    @tt.primitive
    def scaled(x):
        return 2 * x

    def broken_vjp(g, ans, x):
        raise KeyError("the rule broke")
    scaled.defvjp(broken_vjp)
    scaled.defjvp(lambda t, ans, x: 2 * t)
    with tt.detect_anomaly():
        line = next_line()
        out = scaled(W)
    with pytest.raises(RuntimeError) as info:
        tt.sum(out).backward()
    assert f"{THIS_FILE}:{line}" in str(info.value)
