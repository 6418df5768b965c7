"""The checker, user primitives, check_rules, and the tape's views."""

import numpy as np
import pytest

import tinytensor as tt


def test_numerical_grad_matches_closed_form():
    x = np.array([0.3, -1.2, 2.0])
    (g,) = tt.numerical_grad(lambda x: tt.sum(tt.sin(x) * x), x)
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-8)
    (jac,) = tt.numerical_grad(lambda x: tt.exp(x), x)
    assert jac.shape == (3, 3)
    np.testing.assert_allclose(jac, np.diag(np.exp(x)), rtol=1e-8, atol=1e-9)


def test_gradcheck_passes_on_correct_rules_in_float32_too():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4,))
    assert tt.gradcheck(lambda a, b: tt.tanh(a @ b) * tt.exp(b[0]), a, b)
    assert tt.gradcheck(lambda a: tt.softmax(a) * 2.0, a.astype(np.float32), atol=1e-4, rtol=1e-2)


def make_cube(factor_vjp=1.0, factor_jvp=1.0, name="user_cube"):
    cube = tt.primitive(lambda x: x ** 3, name=name)
    cube.defvjp(lambda g, ans, x: factor_vjp * 3 * x ** 2 * g)
    cube.defjvp(lambda t, ans, x: factor_jvp * 3 * x ** 2 * t)
    return cube


def test_user_primitive_works_in_both_modes(registry):
    cube = make_cube()
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = cube(x)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 12.0])
    np.testing.assert_array_equal(y.jvp({x: np.ones(2)}), [3.0, 12.0])
    assert tt.wengert_list(y)[0][1] == "user_cube"
    assert tt.gradcheck(lambda x: cube(x), np.array([0.5, -1.5]), rtol=1e-7, atol=1e-9)


def test_user_primitive_with_two_inputs_and_a_joint_vjp(registry):
    @tt.primitive
    def user_hypot(a, b):
        return np.sqrt(a * a + b * b)
    user_hypot.defvjp(lambda g, ans, a, b: (g * a / ans, g * b / ans))
    user_hypot.defjvp(lambda t, ans, a, b: t * a / ans, lambda t, ans, a, b: t * b / ans)
    assert tt.gradcheck(user_hypot, np.array([3.0, 1.0]), np.array([4.0, 2.0]), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_gradcheck_catches_a_rule_off_by_a_relative_1e_3(mode, registry):
    bad = make_cube(factor_vjp=1.001 if mode == "rev" else 1.0,
                    factor_jvp=1.001 if mode == "fwd" else 1.0, name="user_bad_cube")
    x = np.array([0.7, -1.3])
    with pytest.raises(tt.GradcheckError) as info:
        tt.gradcheck(lambda x: bad(x), x, rtol=1e-6, atol=1e-9)
    message = str(info.value)
    assert f"mode '{mode}'" in message and "argument 0" in message
    assert "analytic" in message and "numerical" in message and "relative error 0.001" in message
    other = "fwd" if mode == "rev" else "rev"
    assert tt.gradcheck(lambda x: bad(x), x, rtol=1e-6, atol=1e-9, modes=(other,))


def test_check_rules_covers_user_primitives_and_flags_broken_ones(capsys, registry):
    make_cube(name="user_good_cube")
    make_cube(factor_vjp=1.001, name="user_broken_cube")
    with pytest.raises(tt.GradcheckError, match="user_broken_cube"):
        tt.check_rules(only=["user_good_cube", "user_broken_cube"])
    rows = {r["op"]: r for r in tt.check_rules(raise_on_failure=False,
                                               only=["user_good_cube", "user_broken_cube"])}
    printed = capsys.readouterr().out
    assert "VJP error" in printed and "adjoint" in printed and "user_good_cube" in printed
    assert rows["user_good_cube"]["ok"]
    assert not rows["user_broken_cube"]["ok"]
    assert rows["user_broken_cube"]["adjoint"] > 1e-4   # the VJP no longer transposes the JVP
    # (that every built-in passes is test_check_messages.py's test_check_rules_passes_on_the_builtins)


def test_to_dot_lists_values_and_edges():
    x = tt.tensor(np.ones((2, 3)), name="x")
    W = tt.tensor(np.ones((3, 4)), requires_grad=True, name="W")
    dot = tt.to_dot(tt.sum(tt.relu(tt.dot(x, W))))
    assert dot.startswith("digraph")
    assert '"W" -> "z1"' in dot and '"x" -> "z1"' in dot and '"z1" -> "z2"' in dot
    assert "dot\\n(2, 4)" in dot and "relu" in dot
