"""Checks that cannot pass silently (check_rules, gradcheck) and plain error messages."""

import numpy as np
import pytest

import tinytensor as tt


def test_check_rules_raises_on_a_wrong_rule_after_printing(capsys, registry):
    bad = tt.primitive(lambda x: x ** 3, name="user_wrong_cube")
    bad.defvjp(lambda g, ans, x: 3.1 * x ** 2 * g)
    bad.defjvp(lambda t, ans, x: 3 * x ** 2 * t)
    with pytest.raises(tt.GradcheckError, match="user_wrong_cube"):
        tt.check_rules(only=bad)
    assert "user_wrong_cube" in capsys.readouterr().out
    rows = tt.check_rules(raise_on_failure=False, verbose=False, only="user_wrong_cube")
    assert not {r["op"]: r for r in rows}["user_wrong_cube"]["ok"]


def test_check_rules_reports_a_primitive_with_one_mode_only(registry):
    half = tt.primitive(lambda x: x ** 3, name="user_vjp_only")
    half.defvjp(lambda g, ans, x: 3 * x ** 2 * g)
    rows = {r["op"]: r for r in tt.check_rules(raise_on_failure=False, verbose=False, only=half)}
    assert not rows["user_vjp_only"]["ok"]
    assert "no JVP rule" in rows["user_vjp_only"]["error"]
    assert half.jvps is None and half.joint_jvp is None       # None, not a stub
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="user_vjp_only has no JVP rule.*defjvp"):
        half(x).jvp({x: np.ones(2)})
    half(x).sum().backward()
    only_jvp = tt.primitive(lambda x: x ** 3, name="user_jvp_only")
    only_jvp.defjvp(lambda t, ans, x: 3 * x ** 2 * t)
    with pytest.raises(NotImplementedError, match="user_jvp_only has no VJP rule.*defvjp"):
        only_jvp(x).sum().backward()


def test_check_rules_passes_on_the_builtins(capsys, registry):
    for name in set(tt.REGISTRY) - set(tt.ops.BUILTIN):   # other tests' primitives, if any
        del tt.REGISTRY[name]
    rows = tt.check_rules()                                 # does not raise
    assert len(rows) == len(tt.ops.BUILTIN) and all(r["ok"] for r in rows)


def test_gradcheck_with_integer_arguments_explains():
    with pytest.raises(TypeError, match=r"floating-point.*2\.0"):
        tt.gradcheck(lambda x, y: x * y, 2, 5)
    assert tt.gradcheck(lambda x, y: x * y, 2.0, 5.0)
    with pytest.raises(TypeError, match=r"numerical_grad.*floating-point.*int64"):
        tt.numerical_grad(lambda x: x * 2, np.array([1, 2]))
    assert tt.gradcheck(lambda x, labels: tt.sum(x[labels]), np.ones(3), np.array([0, 2]))


@pytest.mark.parametrize("call", [
    lambda a, b: a @ b,
    lambda a, b: tt.matmul(a, b),
    lambda a, b: np.matmul(a, b),
    lambda a, b: tt.dot(a, b),
    lambda a, b: tt.linear(a, b, tt.zeros(3)),
], ids=["@", "matmul", "np.matmul", "dot", "linear"])
def test_matmul_shape_error_is_plain(call):
    a, b = tt.randn(2, 3, requires_grad=True), tt.randn(2, 3)
    with pytest.raises(ValueError) as info:
        call(a, b)
    message = str(info.value)
    assert "(2, 3)" in message and "gufunc" not in message and "core dimension" not in message
    assert message.count("matmul:") <= 1 and "must" in message


def test_matmul_batch_and_scalar_errors_are_plain():
    with pytest.raises(ValueError) as info:
        tt.matmul(tt.randn(2, 2, 3), tt.randn(3, 3, 4))
    assert "gufunc" not in str(info.value) and "(2, 2, 3)" in str(info.value)
    with pytest.raises(ValueError) as info:
        tt.matmul(tt.randn(3), tt.tensor(2.0))
    assert "gufunc" not in str(info.value) and "0-d" in str(info.value)
