"""Checks of a device against the CPU, shared by tests/devices/test_device_neutral.py (a stand-in
library, on the CPU) and tests/devices/test_gpu.py (CuPy): the op sweep, the transforms, MLP training.

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
from tinytensor import backend, specs
from tinytensor.specs import EXTRA_SPECS, OP_SPECS
from tinytensor.tape import forward_sweep, reverse_sweep

ROWS = {**OP_SPECS, **EXTRA_SPECS}
TOLERANCE = {np.dtype(np.float64): dict(rtol=1e-9, atol=1e-12),
             np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6)}


# Rows that cannot run off NumPy yet, with the reason: expected to fail (strictly, so a fixed row
# must leave this list): a way to merge new primitives before their device paths (tt.scipy's, today).
HOST_ONLY = {}
HOST_ONLY.update(specs.HOST_ONLY_ROWS)   # tt.scipy's rows with SciPy forwards (issue 24)


def sweep_params(runs_anyway=()):
    """pytest params (row, case index, dtype) with ids such as "softmax-2-float32". `runs_anyway`:
    rows of HOST_ONLY that the device's library runs all the same (swept like the others)."""
    host_only = {name: why for name, why in HOST_ONLY.items() if name not in runs_anyway}

    def marks(name):
        return [pytest.mark.xfail(reason=host_only[name], strict=True)] if name in host_only else []
    return [pytest.param(name, i, dtype, id=f"{name}-{i}-{np.dtype(dtype).name}", marks=marks(name))
            for name, spec in ROWS.items() for i in range(len(spec.cases()))
            for dtype in (np.float64, np.float32)
            if name not in host_only or (i == 0 and dtype is np.float64)]   # one failing case is proof


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
        tol = dict(TOLERANCE.get(np.dtype(ref.dtype), dict(rtol=0, atol=0)))
        if ref.size and ref.dtype.kind in "fc":   # a linear-algebra result is accurate to its norm,
            tol["atol"] *= max(1.0, float(np.max(np.abs(ref))))   # not entry by entry (svd on cuSOLVER)
        np.testing.assert_allclose(backend.to_host(value), np.asarray(ref), err_msg=what, **tol)


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
            loss = loss_fn(model(xb), yb) + 1e-3 * tt.frobenius_norm(model[0].weight)
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
    """The first Python block of the GPU guide (docs/guides/gpu.md; shown, not run, by the docs:
    it needs a GPU, so this runs it on the CPU and on the stand-in device library)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "docs", "guides", "gpu.md")) as f:
        page = f.read()
    return page.split("```{code-block} python\n", 1)[1].split("```", 1)[0]


# ----- a small CNN: conv, pools, batch norm, dropout, the losses' options, every optimizer and schedule -----
OPTIMIZERS = {
    "sgd": lambda ps: tt.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adam": lambda ps: tt.optim.Adam(ps, lr=1e-2, amsgrad=True, weight_decay=1e-3),
    "adamw": lambda ps: tt.optim.AdamW(ps, lr=1e-2),
    "rmsprop": lambda ps: tt.optim.RMSprop(ps, lr=1e-3, momentum=0.5, centered=True),
}
SCHEDULES = {
    "sgd": lambda opt: tt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    "adam": lambda opt: tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4),
    "adamw": lambda opt: tt.optim.lr_scheduler.LinearLR(opt, total_iters=3),
    "rmsprop": lambda opt: tt.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5),
}


def _cnn():
    nn = tt.nn
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1, bias=False, rng=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, stride=1, rng=2), nn.AvgPool2d(2), nn.Dropout(0.25, rng=3), nn.Flatten(),
        nn.Linear(6, 4, rng=4))


def train_cnn(device, optimizer, steps=4):
    """A few steps of a CNN on 8x8 images (float32) on `device`: conv (padded and not), batch
    norm, max and average pooling, dropout; CrossEntropyLoss with class weights, ignore_index and
    label smoothing on 3 classes, BCEWithLogitsLoss with pos_weight and weight on the 4th output,
    gradient clipping, `optimizer` and its schedule. Returns (model, losses, eval output)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 1, 8, 8)).astype(np.float32)
    y = np.array([0, 2, 1, -100, 2, 0])
    flags = rng.integers(0, 2, (6,)).astype(np.float32)
    model = _cnn().to(device)
    opt = OPTIMIZERS[optimizer](model.parameters())
    schedule = SCHEDULES[optimizer](opt)
    ce = tt.nn.CrossEntropyLoss(weight=backend.to_device(np.array([1.0, 2.0, 0.5], np.float32), device),
                                ignore_index=-100, label_smoothing=0.1)
    bce = tt.nn.BCEWithLogitsLoss(pos_weight=backend.to_device(np.array([1.5], np.float32), device),
                                  weight=[2.0])
    xb, yb, fb = (backend.to_device(a, device) for a in (X, y, flags))
    losses = []
    for _ in range(steps):
        out = model(xb)
        loss = ce(out[:, :3], yb) + bce(out[:, 3], fb)
        opt.zero_grad()
        loss.backward()
        tt.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        schedule.step(loss) if optimizer == "rmsprop" else schedule.step()
        losses.append(loss.item())
    model.eval()
    return model, losses, model(xb)


def check_cnn(device, optimizer, rtol=1e-4, atol=1e-5):
    """The CNN's steps on `device` and on the CPU: the same losses, parameters, running statistics
    and eval output, all on the device and float32; the optimizer's state there too."""
    cpu_model, cpu_losses, cpu_out = train_cnn("cpu", optimizer)
    model, losses, out = train_cnn(device, optimizer)
    np.testing.assert_allclose(losses, cpu_losses, rtol=rtol)
    assert out.device == device and out.dtype == np.float32
    np.testing.assert_allclose(backend.to_host(out.data), cpu_out.data, rtol=rtol, atol=atol)
    state, cpu_state = model.state_dict(), cpu_model.state_dict()
    assert set(state) == set(cpu_state)
    for name, value in state.items():
        # a Dropout's generator state stays on the host, where its masks are drawn
        assert backend.device_of(value) == ("cpu" if name.endswith(".rng") else device), name
        assert value.dtype == cpu_state[name].dtype, name
        np.testing.assert_allclose(backend.to_host(value), cpu_state[name], rtol=rtol, atol=atol,
                                   err_msg=name)
    for p in model.parameters():
        assert backend.device_of(p.grad) == device and p.grad.dtype == np.float32


def more_layers_and_losses(device):
    """Values and gradients of the other layers and losses on `device`: Embedding, LayerNorm,
    BatchNorm1d (eval), the activation layers, NLLLoss, BCELoss, L1Loss, HuberLoss, MSELoss,
    CrossEntropyLoss on probabilities and on (N, C, d) logits (with weights), and gradient
    clipping by value and by the inf-norm. {what: array}."""
    nn = tt.nn
    rng = np.random.default_rng(5)
    on = lambda a: backend.to_device(np.asarray(a), device)
    emb, norm, bn = nn.Embedding(5, 3, rng=0), nn.LayerNorm(3), nn.BatchNorm1d(3)
    acts = nn.Sequential(nn.GELU(), nn.Softplus(beta=2.0), nn.LeakyReLU(0.1), nn.Tanh(), nn.Sigmoid())
    for m in (emb, norm, bn, acts):
        m.to(device)
    bn(tt.tensor(rng.standard_normal((4, 3)).astype(np.float32), device=device))   # running stats
    bn.eval()
    h = bn(norm(emb(on([[0, 3, 3], [4, 1, 0]])))).reshape(6, 3)     # repeated rows add up
    h = acts(h) - 0.5
    p = tt.sigmoid(h)
    y = on(np.array([0, 2, 1, 1, 0, 2]))
    q = on(rng.dirichlet(np.ones(3), 6).astype(np.float32))
    losses = [
        nn.NLLLoss(weight=on(np.array([1.0, 0.5, 2.0], np.float32)))(nn.LogSoftmax(axis=-1)(h), y),
        nn.BCELoss(weight=[0.5, 1.0, 2.0])(p, q),
        nn.L1Loss()(h, q), nn.HuberLoss(delta=0.1)(h, q), nn.MSELoss(reduction="sum")(h, q),
        nn.CrossEntropyLoss(label_smoothing=0.2)(h, q),
        nn.CrossEntropyLoss(weight=[1.0, 1.0, 1.0])(h.reshape(2, 3, 3).transpose(0, 2, 1), y.reshape(2, 3)),
    ]   # (N, C, d) logits with the plain fused loss: see test_device_neutral's xfail
    total = sum(losses[1:], losses[0])
    total.backward()
    params = list(emb.parameters()) + list(norm.parameters()) + list(bn.parameters())
    results = {f"loss {i}": loss.data for i, loss in enumerate(losses)}
    results.update({f"grad {i}": p.grad for i, p in enumerate(params)})
    nn.utils.clip_grad_norm_(params, 0.1, norm_type=np.inf)
    nn.utils.clip_grad_value_(params, 0.01)
    results.update({f"clipped {i}": p.grad for i, p in enumerate(params)})
    return results


def check_more_layers_and_losses(device, rtol=1e-4, atol=1e-6):
    expected, got = more_layers_and_losses("cpu"), more_layers_and_losses(device)
    for what, ref in expected.items():
        assert backend.device_of(got[what]) == device, what
        assert got[what].dtype == ref.dtype, what
        np.testing.assert_allclose(backend.to_host(got[what]), ref, rtol=rtol, atol=atol, err_msg=what)
