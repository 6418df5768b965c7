"""The lecture's scalar engine (tinytensor.scalar), and the tensor engine checked against it.

The lecture's worked examples with their exact numbers; 100,000-deep chains in both modes; flat
memory for a leaf reused over many steps; and seeded random expressions replayed through the
scalar engine, through tinytensor on 0-d tensors, and through tinytensor vectorised over many
points at once, comparing values, reverse-mode and forward-mode derivatives to 1e-12.
"""

import gc
import math
import operator
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import scalar
from tinytensor.scalar import Node, forward

TOL = dict(rtol=1e-12, atol=1e-12)


# ----- the lecture's examples -----------------------------------------------------------------------
def lecture_graph():
    """f(x1, x2) = ln x1 + x1 x2 - sin x2 at (2, 5), built with the wrapping functions."""
    x1, x2 = Node(2.0), Node(5.0)
    v1 = scalar.log(x1)
    v2 = scalar.mul(x1, x2)
    v3 = scalar.sin(x2)
    v4 = scalar.add(v1, v2)
    v5 = scalar.sub(v4, v3)
    return x1, x2, v1, v2, v3, v4, v5


def test_lecture_nodes_hold_the_lectures_members():
    x1, x2, v1, v2, v3, v4, v5 = lecture_graph()
    assert v5.value == pytest.approx(11.652071455223084, abs=1e-15)
    assert v5.value == math.log(2) + 10 - math.sin(5)
    # The lecture's table for v2 = x1 * x2: value 10, parents [x1, x2], children [v4], "mul", [5, 2].
    assert v2.value == 10.0
    assert v2.parent_nodes == [x1, x2]
    assert v2.child_nodes == [v4]
    assert v2.operator == "mul"
    assert v2.grad_wrt_parents == [5.0, 2.0]
    assert x1.child_nodes == [v1, v2] and x2.child_nodes == [v2, v3]
    assert x1.parent_nodes == [] and x1.operator == "input"   # as the NTU reference names it
    assert [v.operator for v in (v1, v3, v4, v5)] == ["log", "sin", "add", "sub"]
    assert v1.grad_wrt_parents == [0.5] and v3.grad_wrt_parents == [math.cos(5.0)]
    assert v5.grad_wrt_parents == [1.0, -1.0]


def test_lecture_topological_order_from_x1():
    x1, x2, v1, v2, v3, v4, v5 = lecture_graph()
    # The lecture's DFS appends [v5, v4, v1, v2, x1]; reversed, each node precedes its children.
    assert scalar.topological_order(x1) == [x1, v2, v1, v4, v5]
    assert scalar.topological_order(x2) == [x2, v3, v2, v4, v5]


def test_lecture_forward_mode_from_x1_then_x2_on_the_same_graph():
    x1, x2, v1, v2, v3, v4, v5 = lecture_graph()
    forward(x1)
    assert [v.partial_derivative for v in (x1, x2, v1, v2, v3, v4, v5)] == [1.0, 0.0, 0.5, 5.0, 0.0, 5.5, 5.5]
    forward(x2)   # v1 and x1 are not reachable from x2: their old partial derivatives must not leak
    assert v1.partial_derivative == 0.0 and x1.partial_derivative == 0.0
    assert v4.partial_derivative == 2.0
    assert v3.partial_derivative == math.cos(5.0)
    assert v5.partial_derivative == 2.0 - math.cos(5.0)
    forward(x1)
    assert v5.partial_derivative == 5.5


def test_lecture_reverse_mode_sets_every_adjoint():
    x1, x2, v1, v2, v3, v4, v5 = lecture_graph()
    v5.backward()
    # CS6216: adjoints 1, 1, -1, 1, 1, then x2: -cos 5 + 2 and x1: 5 + 1/2.
    assert [v.grad for v in (v5, v4, v3, v2, v1)] == [1.0, 1.0, -1.0, 1.0, 1.0]
    assert x1.grad == 5.5
    assert x2.grad == 2.0 - math.cos(5.0)


def test_blog_example_e_equals_a_plus_b_times_b_plus_1():
    a, b = Node(2.0), Node(1.0)
    e = (a + b) * (b + 1)
    assert e.value == 6.0
    e.backward()
    assert (a.grad, b.grad) == (2.0, 5.0)
    forward(a)
    assert e.partial_derivative == 2.0
    forward(b)
    assert e.partial_derivative == 5.0


def test_backward_sets_rather_than_accumulates():
    w = Node(3.0)
    y = w * w
    y.backward()
    y.backward()
    assert w.grad == 6.0          # set, not 12
    z = 10 * w
    z.backward()
    assert w.grad == 10.0         # the latest backward wins
    (y + z).backward()            # a sum of losses: backward the sum
    assert w.grad == 16.0


def test_operators_with_numbers_on_either_side():
    x = Node(0.5)
    cases = [  # (expression, value, derivative)
        (lambda x: 2 * x, 1.0, 2.0), (lambda x: x * 2, 1.0, 2.0),
        (lambda x: x - 1, -0.5, 1.0), (lambda x: 1 - x, 0.5, -1.0),
        (lambda x: x + 1, 1.5, 1.0), (lambda x: 1 + x, 1.5, 1.0),
        (lambda x: 1 / x, 2.0, -4.0), (lambda x: x / 2, 0.25, 0.5),
        (lambda x: -x, -0.5, -1.0), (lambda x: x ** 3, 0.125, 0.75), (lambda x: x ** 0.5, 0.5 ** 0.5,
                                                                       0.5 * 0.5 ** -0.5),
        (lambda x: x.exp(), math.exp(0.5), math.exp(0.5)), (lambda x: x.tanh(), math.tanh(0.5),
                                                            1 - math.tanh(0.5) ** 2),
    ]
    for f, value, derivative in cases:
        y = f(x)
        assert y.value == pytest.approx(value, rel=1e-15)
        y.backward()
        forward(x)
        assert x.grad == pytest.approx(derivative, rel=1e-15)
        assert y.partial_derivative == pytest.approx(derivative, rel=1e-15)


# ----- deep graphs and memory ----------------------------------------------------------------------
DEPTH = 100_000


def test_a_100000_deep_chain_in_both_modes():
    x = Node(0.5)
    y, value, derivative = x, 0.5, 1.0
    for _ in range(DEPTH):   # y = sin(sin(...sin(x)))
        derivative *= math.cos(value)
        value = math.sin(value)
        y = scalar.sin(y)
    y.backward()
    ordering = forward(x)
    assert len(ordering) == DEPTH + 1
    assert y.value == value
    assert x.grad == pytest.approx(derivative, rel=1e-12)
    assert y.partial_derivative == pytest.approx(derivative, rel=1e-12)
    del y, ordering   # freeing a 100,000-deep graph must not overflow the C stack either


def test_a_leaf_reused_for_many_steps_keeps_memory_flat():
    """Children are held weakly: a weight must not collect every graph built from it."""
    w, b = Node(0.3), Node(-0.2)
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal(64).tolist(), rng.standard_normal(64).tolist()
    gc.disable()   # only reference counting frees the graphs: there must be no cycles
    tracemalloc.start()
    try:
        for step in range(10_000):
            x, y = xs[step % 64], ys[step % 64]
            loss = (w * x + b - y) ** 2
            loss.backward()
            w.value -= 0.01 * w.grad
            b.value -= 0.01 * b.grad
            if step == 1_000:
                early = tracemalloc.get_traced_memory()[0]
        late = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        gc.enable()
    assert late - early < 4096, f"memory grew by {late - early} bytes over 9,000 steps"
    assert len(w.child_nodes) == 1 and len(w._child_refs) <= 16   # only the last step's graph
    del loss
    assert w.child_nodes == [] and b.child_nodes == []


# ----- random expressions through both engines ------------------------------------------------------
BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
NAMED_BINARY = ("add", "sub", "mul", "div")
UNARY = ("neg", "log", "exp", "sin", "cos", "tanh")
POWERS = (2.0, 3.0, 0.5)
# The same wrapping-function names over plain NumPy: the reference values, and the generator's guard.
NUMPY_OPS = SimpleNamespace(add=np.add, sub=np.subtract, mul=np.multiply, div=np.divide, neg=np.negative,
                            log=np.log, exp=np.exp, sin=np.sin, cos=np.cos, tanh=np.tanh)


def run_expression(program, inputs, ops):
    """Evaluate a program from `random_expression` on `inputs` with the functions of module `ops`
    (`scalar`, `tinytensor` or `NUMPY_OPS`); binary operators go through Python's operators."""
    values = list(inputs)
    for op, *args in program:
        a = [values[i] if isinstance(i, int) else i for i in args]   # ints index, floats are constants
        if op in BINARY:
            values.append(BINARY[op](*a))
        elif op == "**":
            values.append(a[0] ** a[1])
        else:
            values.append(getattr(ops, op)(*a))
    return values[-1]


def random_expression(rng, n_inputs, n_ops, points):
    """A random program over `n_inputs` inputs: a list of (op, operand, ...) where an operand is
    the index of an earlier value (an int) or a constant (a float, on either side).

    `points` (n_inputs, P) are where it will be evaluated: an op is kept only if its operands
    are inside its domain at every point (log of > 0.05, division by |x| > 0.1, exp of < 5) and
    its result stays below 1e3 and is not the same at every point (x - x), so the values and
    derivatives compared are well conditioned and not trivially zero.
    The output is the sum of every value nothing else used, so it depends on every input.
    """
    values = [np.asarray(p, dtype=float) for p in points]
    unused = set(range(n_inputs))
    program = []

    def operand(constant_chance=0.0):
        if rng.random() < constant_chance:
            return float(np.round(rng.uniform(-2, 2), 3))
        return int(rng.integers(len(values)))

    while len(program) < n_ops:
        kind = rng.choice(["binary", "named", "unary", "power"], p=[0.35, 0.15, 0.4, 0.1])
        if kind == "binary":
            op = str(rng.choice(list(BINARY)))
            args = [operand(0.2), operand()] if rng.random() < 0.5 else [operand(), operand(0.2)]
        elif kind == "named":
            op, args = str(rng.choice(NAMED_BINARY)), [operand(), operand()]
        elif kind == "unary":
            op, args = str(rng.choice(UNARY)), [operand()]
        else:
            op, args = "**", [operand(), float(rng.choice(POWERS))]
        a = [values[i] if isinstance(i, int) else i for i in args]
        if (op == "log" and np.min(a[0]) <= 0.05
                or op in ("/", "div") and np.min(np.abs(a[1])) <= 0.1
                or op == "exp" and np.max(a[0]) >= 5
                or op == "**" and a[1] == 0.5 and np.min(a[0]) <= 0.05):
            continue
        with np.errstate(all="ignore"):
            value = run_expression([(op, *range(len(a)))], a, NUMPY_OPS)
        if not np.all(np.isfinite(value)) or np.max(np.abs(value)) >= 1e3 or np.ptp(value) == 0:
            continue   # (a value equal at every point, like x - x, would make the rest degenerate)
        program.append((op, *args))
        values.append(value)
        unused.difference_update(i for i in args if isinstance(i, int))
        unused.add(len(values) - 1)
    sinks = sorted(unused)
    total = sinks[0]
    for s in sinks[1:]:
        program.append(("+", total, s))
        values.append(values[total] + values[s])
        total = len(values) - 1
    return program


def scalar_derivatives(program, point):
    """Value, reverse-mode and forward-mode derivatives of a program at one point, scalar engine."""
    xs = [Node(v) for v in point]
    y = run_expression(program, xs, scalar)
    y.backward()
    reverse = [x.grad for x in xs]
    forward_ = []
    for x in xs:
        forward(x)
        forward_.append(y.partial_derivative)
    return y.value, reverse, forward_


def tensor_derivatives(program, point):
    """The same with tinytensor: `point` entries may be floats (0-d tensors) or arrays (vectorised)."""
    xs = [tt.tensor(v, requires_grad=True) for v in point]
    y = run_expression(program, xs, tt)
    y.backward(np.ones(y.shape))
    reverse = [x.grad for x in xs]
    forward_ = [y.jvp({x: np.ones(x.shape)}) for x in xs]
    return y.data, reverse, forward_


@pytest.mark.parametrize("seed", range(25))
def test_random_expressions_agree_in_both_engines_and_both_modes(seed):
    rng = np.random.default_rng(seed)
    n_inputs, n_points = int(rng.integers(1, 4)), 16
    points = rng.uniform(-2, 2, size=(n_inputs, n_points))
    program = random_expression(rng, n_inputs, int(rng.integers(5, 25)), points)

    per_point = [scalar_derivatives(program, points[:, j].tolist()) for j in range(n_points)]
    values = np.array([p[0] for p in per_point])
    reverse = np.array([p[1] for p in per_point]).T        # (n_inputs, n_points)
    forward_ = np.array([p[2] for p in per_point]).T
    assert np.all(np.isfinite(reverse)) and np.any(reverse != 0)

    np.testing.assert_allclose(values, run_expression(program, points, NUMPY_OPS), **TOL)
    np.testing.assert_allclose(forward_, reverse, **TOL)   # the two modes of the scalar engine

    # tinytensor, one point at a time on 0-d tensors
    for j in range(n_points):
        value, rev, fwd = tensor_derivatives(program, points[:, j].tolist())
        np.testing.assert_allclose(value, values[j], **TOL)
        np.testing.assert_allclose(np.array(rev, dtype=float), reverse[:, j], **TOL)
        np.testing.assert_allclose(np.array(fwd, dtype=float), forward_[:, j], **TOL)

    # tinytensor, vectorised: all points at once
    value, rev, fwd = tensor_derivatives(program, list(points))
    np.testing.assert_allclose(value, values, **TOL)
    np.testing.assert_allclose(np.array(rev), reverse, **TOL)
    np.testing.assert_allclose(np.array(fwd), forward_, **TOL)


def test_the_generator_is_seeded_and_covers_every_op():
    def make(seed):
        rng = np.random.default_rng(seed)
        return random_expression(rng, 2, 20, rng.uniform(-2, 2, size=(2, 8)))

    assert make(3) == make(3)
    ops = {step[0] for seed in range(25) for step in make(seed)}
    assert ops >= set(BINARY) | set(NAMED_BINARY) | set(UNARY) | {"**"}
