"""Checks of a device against the CPU, shared by tests/test_device_neutral.py (a stand-in
library, on the CPU) and tests/test_gpu.py (CuPy): the op sweep, the transforms, MLP training.

The op sweep: every row of specs.OP_SPECS and specs.EXTRA_SPECS (so rows added later are covered) runs once on
the CPU and once on the device from the same inputs: the value, the VJP of a random cotangent
(reverse mode), the JVP of random tangents (forward mode) and, for scalar outputs, `backward()`.
Each result must live on the device, keep the CPU result's dtype (float32 stays float32) and
agree with it.
"""

import os

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import backend
from tinytensor.specs import EXTRA_SPECS, OP_SPECS
from tinytensor.tape import forward_sweep, reverse_sweep

ROWS = {**OP_SPECS, **EXTRA_SPECS}
TOLERANCE = {np.dtype(np.float64): dict(rtol=1e-9, atol=1e-12),
             np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6)}


# Rows that cannot run off NumPy yet, with the reason: expected to fail (strictly, so a fixed row
# must leave this list). Empty today; a way to merge new primitives before their device paths.
HOST_ONLY = {}


def sweep_params():
    """pytest params (row, case index, dtype) with ids such as "softmax-2-float32"."""
    def marks(name):
        return [pytest.mark.xfail(reason=HOST_ONLY[name], strict=True)] if name in HOST_ONLY else []
    return [pytest.param(name, i, dtype, id=f"{name}-{i}-{np.dtype(dtype).name}", marks=marks(name))
            for name, spec in ROWS.items() for i in range(len(spec.cases()))
            for dtype in (np.float64, np.float32)]


def _is_float(a):
    return np.asarray(a).dtype.kind in "fc"


def run_case(name, index, device, dtype):
    """{what: array} for one case on `device`: "value", "tangent", "vjp i", "backward i"."""
    spec = ROWS[name]
    args, params = spec.cases()[index]
    # to_device's row names the device; a static array (indices, max_unpool2d's hits) lives there too
    params = {k: device if k == "device" else backend.to_device(v, device) if type(v) is np.ndarray else v
              for k, v in params.items()}
    values = [backend.to_device(np.asarray(a, dtype=dtype) if _is_float(a) else np.asarray(a), device)
              for a in args]
    inputs = [tt.Tensor(v, requires_grad=True) if _is_float(a) else v for a, v in zip(args, values)]
    leaves = [x for x in inputs if isinstance(x, tt.Tensor)]
    out = spec.call(*inputs, **params)
    results = {"value": out.data}
    if not out.requires_grad:
        return results
    rng = np.random.default_rng(index)
    cotangent = backend.to_device(rng.standard_normal(out.shape).astype(out.dtype), device)
    tangents = {x: backend.to_device(rng.standard_normal(x.shape).astype(x.dtype), device) for x in leaves}
    grads = reverse_sweep([out], [cotangent], wrt=leaves)
    results["tangent"] = forward_sweep(out, tangents)
    for i, x in enumerate(leaves):
        results[f"vjp {i}"] = grads.get(x)
    if out.size == 1:
        out.backward()
        for i, x in enumerate(leaves):
            results[f"backward {i}"] = x.grad
    return results


def check_case(name, index, device, dtype):
    """Run the case on the CPU and on `device` and compare every result."""
    expected = run_case(name, index, "cpu", dtype)
    got = run_case(name, index, device, dtype)
    assert set(got) == set(expected)
    for what, ref in expected.items():
        value = got[what]
        if ref is None:
            assert value is None, f"{what}: None on the CPU, not on {device}"
            continue
        assert backend.device_of(value) == device, \
            f"{what} came back on {backend.device_of(value)!r}, not on {device!r}"
        assert value.dtype == ref.dtype, f"{what}: dtype {value.dtype} on {device}, {ref.dtype} on the CPU"
        np.testing.assert_allclose(backend.to_host(value), np.asarray(ref), err_msg=what,
                                   **TOLERANCE.get(np.dtype(ref.dtype), dict(rtol=0, atol=0)))


# ----- the transforms ------------------------------------------------------------------------------
def check_transforms(device):
    """grad, value_and_grad, jacobian (both modes), hvp, grad of grad, jvp and vjp on `device`
    give arrays there, equal to the CPU's."""
    rng = np.random.default_rng(1)
    x, v = rng.standard_normal(3), rng.standard_normal(3)
    f = lambda x: tt.sum(tt.sin(x) * x ** 2)
    g = lambda x: tt.tanh(x) * x
    cases = {
        "grad": lambda x, v: tt.grad(f)(x),
        "value_and_grad": lambda x, v: tt.value_and_grad(f)(x)[1],
        "jacobian rev": lambda x, v: tt.jacobian(g)(x),
        "jacobian fwd": lambda x, v: tt.jacobian(g, mode="fwd")(x),
        "hvp": lambda x, v: tt.hvp(f, (x,), (v,)),
        "grad of grad": lambda x, v: tt.grad(lambda y: tt.sum(tt.grad(f)(y) ** 2))(x),
        "jvp": lambda x, v: tt.jvp(f, (x,), (v,))[1],
        "vjp": lambda x, v: tt.vjp(tt.exp, x)[1](v)[0],
        "jacobian of grad": lambda x, v: tt.jacobian(tt.grad(f), mode="fwd")(x),
    }
    for what, transform in cases.items():
        ref = transform(x, v)
        got = transform(backend.to_device(x, device), backend.to_device(v, device))
        assert backend.device_of(got) == device, f"{what} came back on {backend.device_of(got)}"
        np.testing.assert_allclose(backend.to_host(got), ref, rtol=1e-10, err_msg=what)


# ----- training -------------------------------------------------------------------------------------
def train(device, optimizer, steps=5):
    """A few epochs of an MLP 8-16-3 (float32) with `optimizer` on `device`: (model, losses)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 8)).astype(np.float32)
    y = rng.integers(0, 3, 32)
    model = tt.nn.Sequential(tt.nn.Linear(8, 16, rng=1), tt.nn.ReLU(), tt.nn.Linear(16, 3, rng=2))
    model.to(device)
    opt = (tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3) if optimizer == "sgd"
           else tt.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-3))
    loss_fn = tt.nn.CrossEntropyLoss()
    losses = []
    for _ in range(steps):
        for xb, yb in tt.data.minibatches(X, y, 8, rng=3, device=device):
            loss = loss_fn(model(xb), yb) + 1e-3 * tt.frobenius_norm(model[0].W)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return model, losses


def check_training(device, optimizer):
    """The same training on `device` and on the CPU: same losses and parameters, all float32 and
    all on the device; the state dict moves back to the CPU."""
    cpu_model, cpu_losses = train("cpu", optimizer)
    model, losses = train(device, optimizer)
    np.testing.assert_allclose(losses, cpu_losses, rtol=1e-4)
    for (name, p), (_, q) in zip(model.named_parameters(), cpu_model.named_parameters()):
        assert p.device == device and p.dtype == np.float32 and p.grad.dtype == np.float32, name
        assert backend.device_of(p.grad) == device, name
        np.testing.assert_allclose(backend.to_host(p.data), q.data, rtol=1e-4, atol=1e-5, err_msg=name)
    state = model.state_dict()
    assert all(backend.device_of(v) == device for v in state.values())
    cpu_model.load_state_dict(state)           # across devices, as PyTorch's
    fresh = train("cpu", optimizer, steps=0)[0]
    fresh.to(device).load_state_dict({k: backend.to_host(v) for k, v in state.items()})
    x = np.ones((2, 8), np.float32)
    out = fresh(backend.to_device(x, device))
    np.testing.assert_allclose(backend.to_host(out.data), cpu_model(x).data, rtol=1e-5, atol=1e-6)
    mse = tt.nn.MSELoss()(out, np.zeros((2, 3), np.float32).tolist())
    assert mse.device == device


def check_out_of_range_labels(device, bad):
    """A class index outside [0, classes) on a device gives NaN for its row (loss and gradient),
    never a silently wrong number (CuPy wraps such an index; the CPU raises IndexError)."""
    z = tt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True, device=device)
    labels = backend.to_device(np.array([0, bad]), device)
    rows = tt.softmax_cross_entropy(z, labels, reduction="none")
    rows.sum().backward()
    loss, grad = backend.to_host(rows.data), backend.to_host(z.grad)
    assert np.isfinite(loss[0]) and np.isnan(loss[1]), loss
    assert np.isfinite(grad[0]).all() and np.isnan(grad[1]).all(), grad
    p = tt.softmax(tt.tensor(np.ones((2, 3)), device=device))
    assert np.isnan(backend.to_host(tt.cross_entropy(p.detach(), labels, reduction="none").data)[1])
    assert np.isnan(tt.softmax_cross_entropy(z, labels).item())


def readme_gpu_example():
    """The first Python block of README.md's "On a GPU" section."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "README.md")) as f:
        section = f.read().split("## On a GPU", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]
