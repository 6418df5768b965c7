"""optim (issue 12): AdamW, RMSprop, amsgrad against NumPy references of PyTorch's update rules;
parameter groups; state_dict / load_state_dict; the version check after a step; and, when torch
is installed, every optimizer against torch.optim itself."""

import numpy as np
import pytest

import tinytensor as tt

SHAPES = [(3, 4), (4,)]


def make_params(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [tt.tensor(rng.standard_normal(s), requires_grad=True, dtype=dtype) for s in SHAPES]


def gradients(steps, seed=1):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) for s in SHAPES] for _ in range(steps)]


def run(opt, params, grads):
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.astype(p.dtype)
        opt.step()
    return [p.data for p in params]


def adam_reference(params, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                   amsgrad=False, decoupled=False):
    params = [p.copy() for p in params]
    b1, b2 = betas
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    vmax = [np.zeros_like(p) for p in params]
    for t, step_grads in enumerate(grads, start=1):
        for i, g in enumerate(step_grads):
            if decoupled:
                params[i] = params[i] * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * params[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            vmax[i] = np.maximum(vmax[i], v[i])
            second = vmax[i] if amsgrad else v[i]
            params[i] = params[i] - lr / (1 - b1 ** t) * m[i] / (np.sqrt(second / (1 - b2 ** t)) + eps)
    return params


def rmsprop_reference(params, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                      centered=False):
    params = [p.copy() for p in params]
    sq = [np.zeros_like(p) for p in params]
    gavg = [np.zeros_like(p) for p in params]
    buf = [np.zeros_like(p) for p in params]
    for step_grads in grads:
        for i, g in enumerate(step_grads):
            g = g + weight_decay * params[i]
            sq[i] = alpha * sq[i] + (1 - alpha) * g * g
            if centered:
                gavg[i] = alpha * gavg[i] + (1 - alpha) * g
                avg = np.sqrt(sq[i] - gavg[i] ** 2) + eps
            else:
                avg = np.sqrt(sq[i]) + eps
            if momentum:
                buf[i] = momentum * buf[i] + g / avg
                params[i] = params[i] - lr * buf[i]
            else:
                params[i] = params[i] - lr * g / avg
    return params


@pytest.mark.parametrize("options", [dict(lr=0.01), dict(lr=0.01, weight_decay=0.1),
                                     dict(lr=0.05, betas=(0.8, 0.9), amsgrad=True, weight_decay=0.05)])
def test_adamw_matches_reference(options):
    params = make_params()
    start = [p.data.copy() for p in params]
    grads = gradients(6)
    got = run(tt.optim.AdamW(params, **options), params, grads)
    expected = adam_reference(start, grads, decoupled=True, **{"weight_decay": 1e-2, **options})
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_adam_amsgrad_matches_reference():
    params = make_params()
    start = [p.data.copy() for p in params]
    grads = gradients(6)
    got = run(tt.optim.Adam(params, lr=0.05, amsgrad=True, weight_decay=0.1), params, grads)
    for a, b in zip(got, adam_reference(start, grads, lr=0.05, amsgrad=True, weight_decay=0.1)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("options", [
    dict(), dict(lr=0.05, momentum=0.9), dict(weight_decay=0.1, centered=True),
    dict(lr=0.03, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.01)])
def test_rmsprop_matches_reference(options):
    params = make_params()
    start = [p.data.copy() for p in params]
    grads = gradients(6)
    got = run(tt.optim.RMSprop(params, **options), params, grads)
    for a, b in zip(got, rmsprop_reference(start, grads, **options)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("make", [
    lambda p: tt.optim.AdamW(p, lr=0.01), lambda p: tt.optim.RMSprop(p, momentum=0.9, centered=True),
    lambda p: tt.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)])
def test_float32_stays_float32_in_place(make):
    params = make_params(np.float32)
    arrays = [p.data for p in params]
    opt = make(params)
    run(opt, params, gradients(3))
    assert all(p.data is a and p.dtype == np.float32 for p, a in zip(params, arrays))
    arrays = [v for s in opt.state.values() for v in s.values() if isinstance(v, np.ndarray)]
    assert arrays and all(v.dtype == np.float32 for v in arrays)


# ----- parameter groups -------------------------------------------------------------------------
def test_parameter_groups_have_their_own_hyperparameters():
    a, b = make_params()
    opt = tt.optim.SGD([{"params": [a], "lr": 0.5}, {"params": b}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.1]
    assert [g["momentum"] for g in opt.param_groups] == [0.9, 0.9]
    a0, b0 = a.data.copy(), b.data.copy()
    a.grad, b.grad = np.ones(a.shape), np.ones(b.shape)
    opt.step()
    np.testing.assert_allclose(a0 - a.data, 0.5)
    np.testing.assert_allclose(b0 - b.data, 0.1)
    opt.param_groups[1]["lr"] = 0.0        # schedulers write here
    b1 = b.data.copy()
    opt.step()
    np.testing.assert_array_equal(b.data, b1)
    with pytest.raises(ValueError, match="another parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(TypeError, match="no hyperparameter"):
        tt.optim.SGD([{"params": [a], "betas": (0.9, 0.9)}], lr=0.1)


# ----- state dicts ------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda p: tt.optim.SGD(p, lr=0.1, momentum=0.9), lambda p: tt.optim.Adam(p, lr=0.01),
    lambda p: tt.optim.AdamW(p, lr=0.01, amsgrad=True),
    lambda p: tt.optim.RMSprop(p, momentum=0.5, centered=True)])
def test_state_dict_resume_is_bit_identical(make):
    grads = gradients(8)
    params = make_params()
    run(make(params), params, grads)                      # uninterrupted: 8 steps
    straight = [p.data.copy() for p in params]

    first = make_params()
    opt = make(first)
    run(opt, first, grads[:4])
    saved_params, saved = [p.data.copy() for p in first], opt.state_dict()
    run(opt, first, grads[4:6])          # steps after saving must not leak into the saved state
    resumed = make_params()
    for p, a in zip(resumed, saved_params):
        p.data[...] = a
    opt2 = make(resumed)
    opt2.load_state_dict(saved)
    run(opt2, resumed, grads[4:])
    for a, b in zip(resumed, straight):
        np.testing.assert_array_equal(a.data, b)


def test_state_dict_layout_and_errors():
    params = make_params()
    opt = tt.optim.Adam([{"params": params[:1]}, {"params": params[1:], "lr": 0.1}])
    run(opt, params, gradients(2))
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert sorted(sd["state"]) == [0, 1] and sd["state"][0]["step"] == 2
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["lr"] == 0.1
    with pytest.raises(ValueError, match="groups of sizes"):
        tt.optim.Adam(make_params()).load_state_dict(sd)


def test_backward_after_a_step_on_a_saved_value_is_refused_or_fine():
    """The optimizer announces its writes (mark_modified), so the engine's version check (another
    helper's) can see a step between forward and backward; a normal loop never trips it."""
    model = tt.nn.Linear(3, 2, rng=0)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    x = np.ones((4, 3), np.float32)
    for _ in range(3):
        loss = (model(x) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert model.weight._version > -1


# ----- against torch.optim ------------------------------------------------------------------------
def test_optimizers_match_torch():
    torch = pytest.importorskip("torch")
    cases = [
        (lambda p: tt.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
         lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
        (lambda p: tt.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
         lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)),
        (lambda p: tt.optim.Adam(p, lr=0.01, weight_decay=0.1, amsgrad=True),
         lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1, amsgrad=True)),
        (lambda p: tt.optim.AdamW(p, lr=0.01, weight_decay=0.1),
         lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
        (lambda p: tt.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True, weight_decay=0.1),
         lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    ]
    grads = gradients(10)
    for ours, theirs in cases:
        params = make_params()
        tparams = [torch.tensor(p.data.copy(), requires_grad=True) for p in params]
        opt, topt = ours(params), theirs(tparams)
        for step_grads in grads:
            for p, q, g in zip(params, tparams, step_grads):
                p.grad, q.grad = g.copy(), torch.tensor(g)
            opt.step()
            topt.step()
        for p, q in zip(params, tparams):
            np.testing.assert_allclose(p.data, q.detach().numpy(), rtol=1e-12, atol=1e-14, err_msg=repr(opt))
