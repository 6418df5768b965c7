"""A compiled training step is the eager step, seed for seed: 50 steps of a model with Dropout
and BatchNorm, SGD with momentum and a learning-rate schedule, in float64."""

import numpy as np

import tinytensor as tt


def _run(compiled, steps=50):
    f64 = np.float64
    model = tt.nn.Sequential(tt.nn.Linear(4, 16, rng=0, dtype=f64), tt.nn.BatchNorm1d(16, dtype=f64),
                             tt.nn.ReLU(), tt.nn.Dropout(0.2, rng=7), tt.nn.Linear(16, 3, rng=1, dtype=f64))
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    schedule = tt.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    named = dict(model.named_parameters())

    def loss_fn(params, x, y):
        return tt.softmax_cross_entropy(tt.nn.functional_call(model, params, x), y)

    step = tt.value_and_grad(loss_fn)
    if compiled:
        step = tt.compile(step)
    data = np.random.default_rng(3)
    losses = []
    for i in range(steps):
        x, y = data.normal(size=(8, 4)), data.integers(0, 3, size=8)
        if i % 10 == 9:                  # an evaluation pass in between: eval() then train()
            model.eval()
            losses.append(float(np.asarray(step({k: p.data for k, p in named.items()}, x, y)[0])))
            model.train()
            continue
        loss, grads = step({k: p.data for k, p in named.items()}, x, y)
        for k, p in named.items():
            p.grad = grads[k]
        opt.step()
        schedule.step()
        losses.append(float(np.asarray(loss)))
    return losses, {k: p.data.copy() for k, p in named.items()}, model[1].running_var.data.copy(), step


def test_compiled_training_run_with_dropout_and_a_schedule_equals_eager():
    eager_losses, eager_params, eager_var, _ = _run(False)
    losses, params, var, step = _run(True)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-12, atol=1e-12)
    for k in params:
        np.testing.assert_allclose(params[k], eager_params[k], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(var, eager_var, rtol=1e-12, atol=1e-12)
    assert step.traces == 2            # one program per mode, each reused
