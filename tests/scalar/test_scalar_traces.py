"""The scalar engine's printed tables (Node.verbose), node names, and the wrapping functions a
student needs for micrograd's MLP.

The expected creation and forward-mode lines are what the NTU reference implementation
(ntumlgroup/simpleautodiff) prints for the same code; they are compared line by line,
whitespace-insensitively, plus one check that the reference's columns are kept exactly.
"""

import math

import pytest

import tinytensor as tt
from tinytensor import scalar
from tinytensor.scalar import Node


@pytest.fixture
def verbose(monkeypatch):
    """Node.verbose on for one test, names restarting at x1 / v1."""
    scalar.reset_names()
    monkeypatch.setattr(Node, "verbose", True)
    yield
    scalar.reset_names()


def lines(text):
    """Non-empty lines with runs of whitespace collapsed: the comparison is whitespace-insensitive."""
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


F_CREATED = """
x1 = input[] = 2
x2 = input[] = 5
v1 = log['x1'] = 0.693
v2 = mul['x1', 'x2'] = 10
v3 = add['v1', 'v2'] = 10.693
v4 = sin['x2'] = -0.959
v5 = sub['v3', 'v4'] = 11.652
"""

F_FORWARD_X1 = """
dv2/dx1 = (dv2/dx1)(dx1/dx1) + (dv2/dx2)(dx2/dx1)
    = (5)(1) + (2)(0) = 5
dv1/dx1 = (dv1/dx1)(dx1/dx1)
    = (0.5)(1) = 0.5
dv3/dx1 = (dv3/dv1)(dv1/dx1) + (dv3/dv2)(dv2/dx1)
    = (1)(0.5) + (1)(5) = 5.5
dv5/dx1 = (dv5/dv3)(dv3/dx1) + (dv5/dv4)(dv4/dx1)
    = (1)(5.5) + (-1)(0) = 5.5
"""

F_FORWARD_X2 = """
dv4/dx2 = (dv4/dx2)(dx2/dx2)
    = (0.284)(1) = 0.284
dv2/dx2 = (dv2/dx1)(dx1/dx2) + (dv2/dx2)(dx2/dx2)
    = (5)(0) + (2)(1) = 2
dv3/dx2 = (dv3/dv1)(dv1/dx2) + (dv3/dv2)(dv2/dx2)
    = (1)(0) + (1)(2) = 2
dv5/dx2 = (dv5/dv3)(dv3/dx2) + (dv5/dv4)(dv4/dx2)
    = (1)(2) + (-1)(0.284) = 1.716
"""

F_BACKWARD = """
Δv5 = dy/dv5 = 1
Δv4 = Δv5 × ∂v5/∂v4
    = (1)(-1) = -1
Δv3 = Δv5 × ∂v5/∂v3
    = (1)(1) = 1
Δv2 = Δv3 × ∂v3/∂v2
    = (1)(1) = 1
Δx2 = Δv4 × ∂v4/∂x2 + Δv2 × ∂v2/∂x2
    = (-1)(0.284) + (1)(2) = 1.716
Δv1 = Δv3 × ∂v3/∂v1
    = (1)(1) = 1
Δx1 = Δv2 × ∂v2/∂x1 + Δv1 × ∂v1/∂x1
    = (1)(5) + (1)(0.5) = 5.5
dy/dx1 = 5.5
dy/dx2 = 1.716
"""


def test_the_reference_readme_example_prints_the_evaluation_trace_and_forward_mode(verbose, capsys):
    """Exactly the NTU reference's README usage, through `import *`."""
    namespace = {}
    exec("from tinytensor.scalar import *\n"
         "Node.verbose = True\n"
         "x1 = Node(2)\n"
         "x2 = Node(5)\n"
         "y = sub(add(log(x1), mul(x1, x2)), sin(x2))\n", namespace)
    assert lines(capsys.readouterr().out) == lines(F_CREATED)
    namespace["forward"](namespace["x1"])
    assert lines(capsys.readouterr().out) == lines(F_FORWARD_X1)
    namespace["forward"](namespace["x2"])
    assert lines(capsys.readouterr().out) == lines(F_FORWARD_X2)
    namespace["backward"](namespace["y"])   # the reference's function spelling
    assert lines(capsys.readouterr().out) == lines(F_BACKWARD)
    # As in the reference, backward(y) also leaves dy/dnode in partial_derivative.
    assert namespace["x1"].partial_derivative.__round__(3) == 5.5
    assert namespace["x2"].partial_derivative.__round__(3) == 1.716
    assert namespace["x1"].grad == 5.5


def test_the_reference_columns_are_kept_exactly(verbose, capsys):
    x1, x2 = Node(2), Node(5)
    v1 = scalar.mul(x1, x2)
    scalar.forward(x1)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "x1 = input[]            = 2       "
    assert out[2] == "v1 = mul['x1', 'x2']    = 10      "
    assert out[3] == "dv1/dx1 = (dv1/dx1)(dx1/dx1) + (dv1/dx2)(dx2/dx1)       "
    assert out[4] == "\t= (5)(1) + (2)(0)                = 5    "
    assert v1.name == "v1"


def test_the_method_and_the_operators_print_the_same_tables(verbose, capsys):
    x1, x2 = Node(2.0), Node(5.0)
    y = scalar.log(x1) + x1 * x2 - scalar.sin(x2)
    assert lines(capsys.readouterr().out) == lines(F_CREATED)
    y.backward()
    assert lines(capsys.readouterr().out) == lines(F_BACKWARD)
    assert (x1.grad, x2.grad) == (5.5, 2.0 - math.cos(5.0))


BLOG = """
x1 = input[] = 2
x2 = input[] = 1
v1 = add['x1', 'x2'] = 3
x3 = input[] = 1
v2 = add['x2', 'x3'] = 2
v3 = mul['v1', 'v2'] = 6
dv1/dx1 = (dv1/dx1)(dx1/dx1) + (dv1/dx2)(dx2/dx1)
    = (1)(1) + (1)(0) = 1
dv3/dx1 = (dv3/dv1)(dv1/dx1) + (dv3/dv2)(dv2/dx1)
    = (2)(1) + (3)(0) = 2
dv2/dx2 = (dv2/dx2)(dx2/dx2) + (dv2/dx3)(dx3/dx2)
    = (1)(1) + (1)(0) = 1
dv1/dx2 = (dv1/dx1)(dx1/dx2) + (dv1/dx2)(dx2/dx2)
    = (1)(0) + (1)(1) = 1
dv3/dx2 = (dv3/dv1)(dv1/dx2) + (dv3/dv2)(dv2/dx2)
    = (2)(1) + (3)(1) = 5
Δv3 = dy/dv3 = 1
Δv2 = Δv3 × ∂v3/∂v2
    = (1)(3) = 3
Δx3 = Δv2 × ∂v2/∂x3
    = (3)(1) = 3
Δv1 = Δv3 × ∂v3/∂v1
    = (1)(2) = 2
Δx2 = Δv2 × ∂v2/∂x2 + Δv1 × ∂v1/∂x2
    = (3)(1) + (2)(1) = 5
Δx1 = Δv1 × ∂v1/∂x1
    = (2)(1) = 2
dy/dx1 = 2
dy/dx2 = 5
dy/dx3 = 3
"""


def test_the_blog_example_e_equals_a_plus_b_times_b_plus_1(verbose, capsys):
    a, b = Node(2), Node(1)
    e = scalar.mul(scalar.add(a, b), scalar.add(b, Node(1)))
    scalar.forward(a)
    scalar.forward(b)
    e.backward()
    assert lines(capsys.readouterr().out) == lines(BLOG)
    assert (a.grad, b.grad) == (2.0, 5.0)


def test_names_restart_and_can_be_given(verbose, capsys):
    x = Node(1.0)
    v = x * 3.0
    assert (x.name, v.name, v.parent_nodes[1].name) == ("x1", "v1", "x2")   # the constant is an input
    scalar.reset_names()
    assert Node(1.0).name == "x1"
    Node.reset()
    a, b = Node(2.0, name="a"), Node(1.0, name="b")
    e = (a + b) * (b + 1)
    assert [n.name for n in scalar.reverse_topological_order(e)] == ["v3", "v2", "x1", "v1", "b", "a"]
    out = lines(capsys.readouterr().out)
    assert "a = input[] = 2" in out and "v1 = add['a', 'b'] = 3" in out
    e.name = "e"
    e.backward()
    out = lines(capsys.readouterr().out)
    assert out[0] == "Δe = dy/de = 1"
    assert out[-3:] == ["dy/dx1 = 3", "dy/da = 2", "dy/db = 5"]   # numbered inputs, then named
    assert repr(e) == "Node(6.0, name='e', operator='mul')"


def test_nothing_is_printed_when_verbose_is_off(capsys):
    assert Node.verbose is False
    x1, x2 = Node(2.0), Node(5.0)
    y = scalar.sub(scalar.add(scalar.log(x1), scalar.mul(x1, x2)), scalar.sin(x2))
    scalar.forward(x1)
    y.backward()
    scalar.backward(y)
    assert capsys.readouterr().out == ""


def test_the_verbose_sweeps_compute_exactly_what_the_silent_ones_do(monkeypatch, capsys):
    def build():
        x = [Node(v) for v in (0.3, -1.2, 2.5)]
        h = [scalar.tanh(x[0] * x[1] + x[2]), scalar.sigmoid(x[1] - x[0]), x[2] ** 1.5]
        y = (h[0] * h[1] + h[2] / (1 + h[0] ** 2)).exp() + scalar.relu(x[0] * h[2])
        return x, y

    x, y = build()
    y.backward()
    silent = [n.grad for n in x]
    scalar.forward(x[1])
    silent_forward = y.partial_derivative
    monkeypatch.setattr(Node, "verbose", True)
    x, y = build()
    y.backward()
    scalar.forward(x[1])
    assert [n.grad for n in x] == silent
    assert y.partial_derivative == silent_forward
    assert "dy/dx" in capsys.readouterr().out


@pytest.mark.parametrize("value, text", [
    (10.0, "10"), (0.69314718, "0.693"), (-0.9589, "-0.959"), (2.5, "2.5"), (1e-4, "0"),
    (-1e-4, "0"), (-0.0, "0"), (11.6520714, "11.652"), (1234567.0, "1234567"), (math.inf, "inf"),
    (0.2836621854632263, "0.284"), (-1.0, "-1"),
])
def test_numbers_print_rounded_to_3_decimals_without_trailing_zeros(value, text):
    assert scalar._number(value) == text


def test_import_star_gives_the_reference_names_and_keeps_the_builtins():
    namespace = {}
    exec("from tinytensor.scalar import *", namespace)
    for name in ("Node", "add", "sub", "mul", "div", "neg", "power", "log", "exp", "sin", "cos", "tanh",
                 "relu", "sqrt", "sigmoid", "forward", "backward", "topological_order",
                 "reverse_topological_order", "reset_names"):
        assert name in namespace, name
    assert "abs" not in namespace          # abs(-3) stays the builtin; abs(node) still works
    assert abs(Node(-3.0)).value == 3.0


# ----- the wrapping functions a scalar MLP needs -------------------------------------------------
def central_difference(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("name, f, points", [
    ("relu", scalar.relu, (-1.3, 0.7)),
    ("sqrt", scalar.sqrt, (0.3, 4.0)),
    ("sigmoid", scalar.sigmoid, (-40.0, -2.0, 0.0, 3.0, 800.0)),
    ("abs", abs, (-2.0, 0.5)),
    ("pow", lambda x: x ** 2.5, (0.4, 3.0)),
    ("pow", lambda x: 2.0 ** x, (-1.0, 1.5)),
])
def test_new_wrapping_functions_in_both_modes(name, f, points):
    for p in points:
        x = Node(p)
        y = f(x)
        assert y.operator == name
        value = lambda v: f(Node(v)).value
        y.backward()
        scalar.forward(x)
        assert x.grad == y.partial_derivative
        assert x.grad == pytest.approx(central_difference(value, p), rel=1e-6, abs=1e-9)
    assert scalar.sigmoid(Node(-800.0)).value == 0.0 and scalar.sigmoid(Node(800.0)).value == 1.0


def test_a_node_exponent_is_differentiated_in_both_arguments():
    a, b = Node(2.0), Node(3.0)
    y = a ** b
    assert y.value == 8.0
    y.backward()
    assert a.grad == 12.0 and b.grad == pytest.approx(8.0 * math.log(2.0), rel=1e-15)
    scalar.forward(b)
    assert y.partial_derivative == b.grad
    zero = Node(0.0) ** Node(2.0)
    zero.backward()
    assert zero.value == 0.0 and zero.parent_nodes[1].grad == 0.0
    with pytest.raises(ValueError, match=r"base >= 0.*float"):
        Node(-2.0) ** Node(2.0)
    with pytest.raises(ValueError, match="not a real number"):
        Node(-8.0) ** (1 / 3)


def test_float_comparisons_and_identity():
    a, b = Node(2.0), Node(2.0)
    assert a.value == 2.0 and f"{a:.1f}" == "2.0"   # float(a), math.sqrt(a): refused (issue 19)
    assert a == b and a == 2.0 and a is not b and not (a != b)
    assert a < 3 and a <= b and Node(5.0) > a and 3 >= a
    assert len({a, b}) == 2   # hashing stays by identity: one node each
    assert max([Node(1.0), Node(4.0), Node(2.0)]).value == 4.0
    assert +a is a


def test_domain_errors_name_the_op_and_the_node():
    with pytest.raises(ValueError, match=r"scalar.log: log\(x\) of -1.0 is undefined"):
        scalar.log(Node(-1.0, name="x"))
    with pytest.raises(ValueError, match=r"scalar.sqrt: sqrt\(x\) of -4.0"):
        scalar.sqrt(Node(-4.0, name="x"))


def test_a_scalar_neuron_matches_the_tensor_engine():
    """micrograd's neuron, relu(w . x + b), in both engines: same value and gradients."""
    import numpy as np

    w, x, b = [0.5, -1.5, 2.0], [1.0, 0.3, 0.7], 0.1
    ws = [Node(v) for v in w]
    out = scalar.relu(sum((wi * xi for wi, xi in zip(ws, x)), Node(b)))
    out.backward()
    wt = tt.tensor(w, requires_grad=True)
    ot = tt.relu(tt.sum(wt * tt.tensor(x)) + b)
    ot.backward()
    assert out.value == pytest.approx(float(ot.data), rel=1e-15)
    np.testing.assert_allclose([n.grad for n in ws], wt.grad, rtol=1e-15)


def test_the_reference_counters_read_and_restart_the_numbering():
    scalar.reset_names()
    x = Node(1.0)
    x * x
    assert (Node.input_count, Node.intermediate_count) == (1, 1)
    assert (Node.input_count, Node.intermediate_count) == (1, 1)   # reading does not count
    Node.input_count = Node.intermediate_count = 0                  # the reference's own reset
    a = Node(3.0)
    assert (a.name, (a + a).name) == ("x1", "v1")
    Node.intermediate_count = 10
    assert (a * a).name == "v11" and Node(0.0).name == "x2"


def test_a_wrapping_function_written_as_in_the_slides_works(verbose, capsys):
    """The slides' own `mul`: Node(value, parents, "mul"), grad_wrt_parents set afterwards, and
    the new node appended to its parents' child nodes by hand (harmless: Node already did)."""
    def my_mul(node1, node2):
        new_node = Node(node1.value * node2.value, [node1, node2], "mul")
        new_node.grad_wrt_parents = [node2.value, node1.value]
        node1.child_nodes.append(new_node)
        node2.child_nodes.append(new_node)
        return new_node

    x1, x2 = Node(2), Node(5)
    v1 = my_mul(x1, x2)
    assert x1.child_nodes == [v1] and len(x2.child_nodes) == 1
    scalar.forward(x1)
    assert v1.partial_derivative == 5.0
    v1.backward()
    assert (x1.grad, x2.grad) == (5.0, 2.0)
    assert lines(capsys.readouterr().out)[:4] == [
        "x1 = input[] = 2", "x2 = input[] = 5", "v1 = mul['x1', 'x2'] = 10",
        "dv1/dx1 = (dv1/dx1)(dx1/dx1) + (dv1/dx2)(dx2/dx1)"]
