"""tt.evaluation_trace: the lecture's tables from the tensor engine.

The rows of the lecture's f(x1, x2) = ln x1 + x1 x2 - sin x2 at (2, 5): values, tangents from
x1 and from x2 (forward mode), adjoints (reverse mode); the same numbers as the scalar engine
node by node; arrays checked against central differences and backward(); every .grad untouched.
"""

import math

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import scalar


def lecture_f(named=True):
    x1 = tt.tensor(2.0, requires_grad=True, name="x1" if named else None)
    x2 = tt.tensor(5.0, requires_grad=True, name="x2" if named else None)
    return x1, x2, tt.log(x1) + x1 * x2 - tt.sin(x2)


TABLE = """
x1 = 2                      dx1/dx1 = 1     dy/dx1 = 5.5
x2 = 5                      dx2/dx1 = 0     dy/dx2 = 1.716
v1 = log(x1) = 0.693        dv1/dx1 = 0.5   dy/dv1 = 1
v2 = mul(x1, x2) = 10       dv2/dx1 = 5     dy/dv2 = 1
v3 = add(v1, v2) = 10.693   dv3/dx1 = 5.5   dy/dv3 = 1
v4 = sin(x2) = -0.959       dv4/dx1 = 0     dy/dv4 = -1
v5 = sub(v3, v4) = 11.652   dv5/dx1 = 5.5   dy/dv5 = 1
(y = v5)
"""


def test_the_lecture_table_in_both_modes(capsys):
    x1, x2, y = lecture_f()
    rows = tt.evaluation_trace(y, wrt=x1, adjoints=True)
    assert capsys.readouterr().out.split("\n") == TABLE.strip().split("\n") + [""]
    assert [r.label for r in rows] == ["x1", "x2", "v1", "v2", "v3", "v4", "v5"]
    assert [r.op for r in rows] == ["input", "input", "log", "mul", "add", "sin", "sub"]
    assert [r.args for r in rows] == [(), (), ("x1",), ("x1", "x2"), ("v1", "v2"), ("x2",), ("v3", "v4")]
    entries = rows[2:]
    assert [round(r.value, 3) for r in entries] == [0.693, 10, 10.693, -0.959, 11.652]
    assert [r.tangent for r in entries] == [0.5, 5, 5.5, 0, 5.5]
    assert [r.tangent for r in rows[:2]] == [1, 0]
    assert [r.adjoint for r in rows] == [5.5, 2 - math.cos(5), 1, 1, 1, -1, 1]
    assert rows[2]["value"] == rows[2][3] == math.log(2)   # by name, key or position
    assert all(isinstance(r.value, float) for r in rows)


def test_from_x2_and_values_only(capsys):
    x1, x2, y = lecture_f()
    rows = tt.evaluation_trace(y, wrt=x2)
    assert [r.tangent for r in rows] == [0, 1, 0, 2, 2, math.cos(5), 2 - math.cos(5)]
    assert all(r.adjoint is None for r in rows)
    assert "dv5/dx2 = 1.716" in capsys.readouterr().out
    rows = tt.evaluation_trace(y)
    assert capsys.readouterr().out.splitlines() == [   # the lecture's table, as API.md writes it
        "x1 = 2", "x2 = 5", "v1 = log(x1) = 0.693", "v2 = mul(x1, x2) = 10",
        "v3 = add(v1, v2) = 10.693", "v4 = sin(x2) = -0.959", "v5 = sub(v3, v4) = 11.652"]
    assert all(r.tangent is None and r.adjoint is None for r in rows)


def test_every_grad_is_left_as_it_was(capsys):
    x1, x2, y = lecture_f()
    tt.evaluation_trace(y, wrt=x1, adjoints=True)
    assert x1.grad is None and x2.grad is None and y.grad is None
    y.backward()
    before = (x1.grad.copy(), x2.grad.copy())
    tt.evaluation_trace(y, wrt={x2: 3.0}, adjoints=True)
    assert (x1.grad, x2.grad) == before and y.grad is None


def test_unnamed_inputs_and_names_given(capsys):
    x1, x2, y = lecture_f(named=False)
    rows = tt.evaluation_trace(y)
    assert [r.label for r in rows] == ["x1", "x2", "v1", "v2", "v3", "v4", "v5"]
    rows = tt.evaluation_trace(y, names={"a": x1, "b": x2})
    assert [r.label for r in rows][:3] == ["a", "b", "v1"] and rows[3].args == ("a", "b")


def test_the_tensor_engine_matches_the_scalar_engine_node_by_node(capsys):
    """The same expressions through both engines: each node's value, tangent and adjoint."""
    point = (0.7, -1.3, 2.1)

    def expression(m, a, b, c):   # no bare numbers: both engines then make the same nodes
        u = m.tanh(m.mul(a, b))
        w = m.sigmoid(m.sub(c, u))
        return m.add(m.mul(u, w), m.div(m.exp(a), m.sin(c)))

    scalar.reset_names()   # x1, x2, x3, v1, ... as the tensor engine's labels
    nodes = [scalar.Node(v) for v in point]
    y = expression(scalar, *nodes)
    y.backward()
    ordering = scalar.reverse_topological_order(y)
    ordering.sort(key=lambda n: (n.operator != "input", n._label))   # creation order
    tensors = [tt.tensor(v, requires_grad=True) for v in point]
    for i, root in enumerate(nodes):
        scalar.forward(root)
        rows = tt.evaluation_trace(expression(tt, *tensors), wrt=tensors[i], adjoints=True)
        assert [r.label for r in rows] == [n.name for n in ordering]
        assert [r.op for r in rows] == [n.operator for n in ordering]
        np.testing.assert_allclose([r.value for r in rows], [n.value for n in ordering], rtol=1e-14)
        np.testing.assert_allclose([r.tangent for r in rows], [n.partial_derivative for n in ordering],
                                   rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose([r.adjoint for r in rows], [n.grad for n in ordering], rtol=1e-13)


def test_logistic_regression_rows_against_central_differences(capsys):
    rng = np.random.default_rng(0)
    x = tt.tensor(rng.standard_normal((4, 5)), name="x")
    y = tt.tensor(np.eye(3)[[0, 2, 1, 0]], name="y")
    W0 = rng.standard_normal((5, 3))
    direction = rng.standard_normal((5, 3))

    def entries(W):   # z1 = dot(x, W), z2 = softmax(z1), z3 = crossEntropy(z2, y), z4, z5
        z1 = tt.dot(x, W)
        z2 = tt.softmax(z1)
        z3 = tt.crossEntropy(z2, y)
        z4 = tt.frobeniusNorm(W)
        return [z1, z2, z3, z4, z3 + z4]

    W = tt.tensor(W0, requires_grad=True, name="W")
    loss = entries(W)[-1]
    rows = tt.evaluation_trace(loss, wrt={W: direction}, adjoints=True)
    assert [(r.label, r.op, r.args) for r in rows] == [
        ("W", "input", ()), ("v1", "dot", ("x", "W")), ("v2", "softmax", ("v1",)),
        ("v3", "crossEntropy", ("v2", "y")), ("v4", "frobeniusNorm", ("W",)), ("v5", "add", ("v3", "v4"))]
    h = 1e-6
    plus = entries(tt.tensor(W0 + h * direction))
    minus = entries(tt.tensor(W0 - h * direction))
    for row, p, m in zip(rows[1:], plus, minus):
        np.testing.assert_allclose(row.tangent, (p.data - m.data) / (2 * h), rtol=1e-6, atol=1e-8)
    loss.backward()
    np.testing.assert_allclose(rows[0].adjoint, W.grad, rtol=1e-14)
    assert rows[-1].adjoint == 1.0 and rows[3].adjoint == 1.0
    # an intermediate's adjoint, dL/dv1 for v1 = x W, against central differences in v1
    z1 = tt.dot(x, tt.tensor(W0)).data
    numerical = np.zeros_like(z1)
    for index in np.ndindex(*z1.shape):
        e = np.zeros_like(z1)
        e[index] = h
        f = lambda z: tt.crossEntropy(tt.softmax(tt.tensor(z)), y).item()
        numerical[index] = (f(z1 + e) - f(z1 - e)) / (2 * h)
    np.testing.assert_allclose(rows[1].adjoint, numerical, rtol=1e-6, atol=1e-9)
    out = capsys.readouterr().out
    assert "v1 = dot(x, W)" in out and "= (4, 3) in [" in out
    # crossEntropy(softmax(z), y) sends its gradient straight to z: dy/dv2 is never formed, and
    # the table says so rather than showing a zero.
    assert rows[2].adjoint is None and "dy/dv2 = skipped (fused into crossEntropy)" in out
    assert "grad skipped (fused into crossEntropy)" in tt.to_dot(loss, grads=True)


def test_cross_entropy_of_plain_probabilities_has_every_adjoint(capsys):
    z = tt.tensor([[0.2, 1.0, -0.5]], requires_grad=True, name="z")
    p = tt.exp(z) / tt.sum(tt.exp(z))                     # softmax by hand: not fused
    y = tt.tensor([[0.0, 1.0, 0.0]])
    rows = tt.evaluation_trace(tt.crossEntropy(p, y), adjoints=True)
    p_row = [r for r in rows if r.op == "div"][0]
    np.testing.assert_allclose(p_row.adjoint, -y.data / p.data, rtol=1e-12)
    assert "skipped" not in capsys.readouterr().out


def test_a_non_scalar_output_and_float32(capsys):
    x = tt.tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32), requires_grad=True, name="x")
    y = tt.exp(x) * x
    rows = tt.evaluation_trace(y, wrt=x, adjoints=True)
    expected = np.exp(x.data) * (1 + x.data)
    np.testing.assert_allclose(rows[-1].tangent, expected, rtol=1e-6)
    np.testing.assert_allclose(rows[0].adjoint, expected, rtol=1e-6)   # gradient of y.sum()
    assert rows[0].adjoint.dtype == np.float32 and rows[-1].value.dtype == np.float32
    assert "(3,) [" in capsys.readouterr().out


def test_bad_wrt_is_refused_with_a_reason():
    x1, x2, y = lecture_f()
    c = tt.tensor(1.0)
    with pytest.raises(ValueError, match="does not require grad"):
        tt.evaluation_trace(y, wrt=c)
    with pytest.raises(TypeError, match="wrt must be an input Tensor"):
        tt.evaluation_trace(y, wrt=2.0)
    with pytest.raises(ValueError, match=r"has shape \(2,\) but the input has shape \(\)"):
        tt.evaluation_trace(y, wrt={x1: np.ones(2)})
    with pytest.raises(TypeError, match="keyed by Tensors"):
        tt.evaluation_trace(y, wrt={"x1": 1.0})
