"""The lecture's worked examples
=============================

The lecture's worked examples, with reverse mode, forward mode and numerical differences
side by side.

    python examples/lecture_examples.py

0. The lecture's tables for f at (2, 5): the scalar engine's evaluation trace, forward-mode
   chain rules and adjoints (Node.verbose), and the tensor engine's tt.evaluation_trace
1. f(x1, x2) = ln x1 + x1 x2 - sin x2 at (2, 5)          (NTU slides and report)
2. e = (a + b)(b + 1) at a = 2, b = 1                     (forward/reverse by operator overloading)
3. f = (2 x1 + x2)^2 and f = x^3 as Wengert lists         (Cohen's notes)
4. The logistic-regression loss crossEntropy(softmax(x . W), y) + frobeniusNorm(W), its Wengert
   list, and its gradient checked in both modes.
"""

import numpy as np

import tinytensor as tt
from tinytensor import scalar


def derivative_table(title, f, point, names):
    """Print the value, then d f / d input by backward, jvp and central differences."""
    inputs = [tt.tensor(v, requires_grad=True, name=n) for v, n in zip(point, names)]
    out = f(*inputs)
    out.backward()
    numerical = tt.numerical_grad(f, *point)
    print(f"\n{title}\n  value = {out.item():.6f}")
    print(f"  {'':<10}{'backward':>14}{'jvp':>14}{'numerical':>14}")
    for x, n, num in zip(inputs, names, numerical):
        forward = out.jvp({x: np.ones_like(x.data)})
        print(f"  d/d{n:<7}{float(x.grad):>14.6f}{float(forward):>14.6f}{float(num):>14.6f}")
    print("  Wengert list:")
    for lhs, op, args in tt.wengert_list(out):
        print(f"    {lhs} = {op}({', '.join(args)})")


def lecture_tables():
    """f(x1, x2) = ln x1 + x1 x2 - sin x2 at (2, 5), as the NTU reference prints it, then the
    same table from the tensor engine's tape."""
    print("0. The lecture's tables for f(x1, x2) = ln x1 + x1 x2 - sin x2 at (2, 5)")
    print("\nScalar engine, evaluation trace (each node as it is made):")
    scalar.reset_names()
    scalar.Node.verbose = True
    try:
        x1, x2 = scalar.Node(2), scalar.Node(5)
        y = scalar.sub(scalar.add(scalar.log(x1), scalar.mul(x1, x2)), scalar.sin(x2))
        print("\nForward mode from x1 (the chain rule at each node):")
        scalar.forward(x1)
        print("\nReverse mode (each adjoint as a sum of partial adjoints):")
        y.backward()
    finally:
        scalar.Node.verbose = False
    print("\nTensor engine, tt.evaluation_trace(y, wrt=x1, adjoints=True):")
    t1 = tt.tensor(2.0, requires_grad=True, name="x1")
    t2 = tt.tensor(5.0, requires_grad=True, name="x2")
    tt.evaluation_trace(tt.log(t1) + t1 * t2 - tt.sin(t2), wrt=t1, adjoints=True)


def main():
    lecture_tables()
    derivative_table("1. f(x1, x2) = ln x1 + x1 x2 - sin x2 at (2, 5)",
                     lambda x1, x2: tt.log(x1) + x1 * x2 - tt.sin(x2), (2.0, 5.0), ("x1", "x2"))
    derivative_table("2. e = (a + b)(b + 1) at a = 2, b = 1",
                     lambda a, b: (a + b) * (b + 1), (2.0, 1.0), ("a", "b"))
    derivative_table("3a. f = (2 x1 + x2)^2 at (1, 3): df/dx1 = 8 x1 + 4 x2 = 20, df/dx2 = 4 x1 + 2 x2 = 10",
                     lambda x1, x2: tt.square(tt.add(tt.add(x1, x1), x2)), (1.0, 3.0), ("x1", "x2"))
    derivative_table("3b. f = x^3 at 2: df/dx = 3 x^2 = 12",
                     lambda x: tt.mul(tt.mul(x, x), x), (2.0,), ("x",))

    rng = np.random.default_rng(0)
    x = tt.tensor(rng.standard_normal((8, 5)), name="x")
    y = tt.tensor(np.eye(3)[rng.integers(0, 3, 8)], name="y")
    W = tt.tensor(rng.standard_normal((5, 3)) * 0.5, requires_grad=True, name="W")

    def loss_fn(W):
        return tt.crossEntropy(tt.softmax(tt.dot(x, W)), y) + tt.frobeniusNorm(W)

    loss = loss_fn(W)
    loss.name = "f"
    print("\n4. Logistic regression: crossEntropy(softmax(x . W), y) + frobeniusNorm(W)")
    print(f"  value = {loss.item():.6f}\n  Wengert list:")
    for lhs, op, args in tt.wengert_list(loss):
        print(f"    {lhs} = {op}({', '.join(args)})")
    loss.backward()
    (numerical,) = tt.numerical_grad(loss_fn, W.data)
    direction = rng.standard_normal(W.shape)
    print(f"  max |backward - numerical|        = {np.max(np.abs(W.grad - numerical)):.2e}")
    print(f"  |jvp - <numerical, direction>|    = "
          f"{abs(loss.jvp({W: direction}) - np.sum(numerical * direction)):.2e}")
    print(f"  gradcheck (both modes):            {tt.gradcheck(loss_fn, W.data, rtol=1e-6, atol=1e-9)}")


if __name__ == "__main__":
    main()
