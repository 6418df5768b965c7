"""Issue 19: the scalar engine's Node refuses float() and math.* (micrograd's Value does too)."""

import math

import pytest

from tinytensor.scalar import Node, cos, exp, log, sin


def test_math_on_a_node_is_refused_instead_of_a_constant():
    # the lecture's function with math.sin: x2.grad was 2.0 (sin made a constant) instead of 1.716
    x1, x2 = Node(2.0), Node(5.0)
    with pytest.raises(TypeError, match=r"x2\.value.*sin\(x2\)"):
        log(x1) + x1 * x2 - math.sin(x2)
    for convert in (float, int, complex, math.exp, math.sqrt, math.log):
        with pytest.raises(TypeError, match="gradient would be lost"):
            convert(Node(4.0))
    y = log(x1) + x1 * x2 - sin(x2)          # the engine's spelling
    y.backward()
    assert x2.grad == pytest.approx(2.0 - math.cos(5.0)) and round(x2.grad, 3) == 1.716


def test_values_on_request_and_after_backward():
    a = Node(3.0)
    y = exp(a) * cos(a)
    assert a.value == 3.0 and y.data == y.value and f"{y:.3f}" == f"{y.value:.3f}"
    y.backward()
    assert float(y) == y.value and math.isclose(math.exp(y), math.exp(y.value))   # a loss to log
    with pytest.raises(TypeError):
        float(a)                              # not the output of backward(): still refused
