"""Checking gradients three ways
=============================

Check gradients three ways: reverse mode (`backward`), forward mode (`jvp`) and central
differences (`tt.numerical_grad`), on the lecture's two examples and on every parameter of a
small MLP, in float64.

    python examples/gradient_check.py

Exits with status 1 if any error is above tolerance (so CI can run it).
"""

import sys

import numpy as np

import tinytensor as tt

ATOL, RTOL = 1e-7, 1e-5     # central differences with eps=1e-6 are good to ~1e-9 here


def errors(analytic, numerical):
    """(max absolute error, max relative error |a - n| / max(|a|, |n|)), elementwise."""
    diff = np.abs(analytic - numerical)
    scale = np.maximum(np.maximum(np.abs(analytic), np.abs(numerical)), 1e-12)
    return float(diff.max()), float((diff / scale).max())


def lecture_examples():
    """Both lecture examples: every derivative by the three methods, one row per input."""
    examples = [
        ("f(x1,x2) = ln x1 + x1 x2 - sin x2", lambda x1, x2: tt.log(x1) + x1 * x2 - tt.sin(x2),
         {"x1": 2.0, "x2": 5.0}),
        ("e = (a + b)(b + 1)", lambda a, b: (a + b) * (b + 1), {"a": 2.0, "b": 1.0}),
    ]
    ok = True
    for title, f, point in examples:
        inputs = [tt.tensor(v, requires_grad=True, name=k) for k, v in point.items()]
        out = f(*inputs)
        out.backward()
        numerical = tt.numerical_grad(f, *point.values())
        where = ", ".join(f"{k}={v:g}" for k, v in point.items())
        print(f"\n{title} at {where}: value {out.item():.6f}")
        print(f"  {'d/d':<5}{'backward':>12}{'jvp':>12}{'numerical':>12}")
        for x, num in zip(inputs, numerical):
            fwd = out.jvp({x: np.ones(())})       # tangent 1 on x, 0 on the others
            print(f"  {x.name:<5}{x.grad.item():>12.6f}{fwd.item():>12.6f}{num.item():>12.6f}")
            for value in (x.grad, fwd):
                ok &= bool(np.allclose(value, num, atol=ATOL, rtol=RTOL))
    return ok


def mlp_table(seed=0):
    """The gradient of a small MLP's loss with respect to each parameter, by each method."""
    rng = np.random.default_rng(seed)
    model = tt.nn.Sequential(tt.nn.Linear(4, 6, rng=rng, dtype=np.float64), tt.nn.Tanh(),
                             tt.nn.Linear(6, 5, rng=rng, dtype=np.float64), tt.nn.Sigmoid(),
                             tt.nn.Linear(5, 3, rng=rng, dtype=np.float64))
    x, y = rng.standard_normal((8, 4)), rng.integers(0, 3, 8)
    loss_fn = tt.nn.CrossEntropyLoss()

    loss = loss_fn(model(x), y)        # one tape, used by both modes
    model.zero_grad()
    loss.backward()
    print(f"\nMLP 4-6-5-3 (tanh, sigmoid), cross-entropy on 8 samples: loss {loss.item():.6f}")
    print(f"  {'parameter':<10}{'shape':<9}{'mode':<6}{'max abs error':>15}{'max rel error':>15}")
    ok = True
    for name, p in model.named_parameters():
        # Forward mode: one jvp per entry, each a one-hot tangent on this parameter.
        fwd = np.zeros_like(p.data)
        for k in np.ndindex(p.shape):
            tangent = np.zeros_like(p.data)
            tangent[k] = 1
            fwd[k] = loss.jvp({p: tangent})

        def loss_at(value, p=p):       # the loss as a function of this parameter alone
            saved, p.data = p.data, value.data
            try:
                return loss_fn(model(x), y)
            finally:
                p.data = saved
        (numerical,) = tt.numerical_grad(loss_at, p.data)

        for mode, analytic in (("rev", p.grad), ("fwd", fwd)):
            abs_err, rel_err = errors(analytic, numerical)
            ok &= bool(np.allclose(analytic, numerical, atol=ATOL, rtol=RTOL))
            print(f"  {name:<10}{str(p.shape):<9}{mode:<6}{abs_err:>15.2e}{rel_err:>15.2e}")
    return ok


def main():
    ok = lecture_examples()
    ok &= mlp_table()
    print(f"\nall gradients agree (atol {ATOL:g}, rtol {RTOL:g}): {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    if main():   # a failed check is a non-zero exit (sys.exit(0) would end a gallery build too)
        sys.exit(1)
