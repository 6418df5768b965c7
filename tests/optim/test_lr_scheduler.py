"""lr_scheduler (issue 12): each schedule against a plain-Python reference of PyTorch's formula
(CosineAnnealingLR: the closed form against PyTorch's recursive one), ReduceLROnPlateau's
threshold, patience, cooldown and min_lr, state dicts; and, when installed, against torch."""

import math

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.optim import lr_scheduler as S


def optimizer(lrs=(0.1,)):
    groups = [{"params": [tt.tensor(np.zeros(2), requires_grad=True)], "lr": lr} for lr in lrs]
    return tt.optim.SGD(groups, lr=lrs[0])


def lrs_over(sched, epochs):
    out = [sched.get_last_lr()]
    for _ in range(epochs):
        sched.optimizer.step()
        sched.step()
        out.append(sched.get_last_lr())
    return np.array(out)


def test_step_and_exponential_lr():
    got = lrs_over(S.StepLR(optimizer((0.1, 1.0)), step_size=3, gamma=0.5), 10)
    expected = [[lr * 0.5 ** (e // 3) for lr in (0.1, 1.0)] for e in range(11)]
    np.testing.assert_allclose(got, expected, rtol=1e-15)
    got = lrs_over(S.ExponentialLR(optimizer(), gamma=0.9), 10)
    np.testing.assert_allclose(got[:, 0], 0.1 * 0.9 ** np.arange(11), rtol=1e-14)


def cosine_recursive(base, eta_min, T_max, epochs):
    """PyTorch's CosineAnnealingLR.get_lr (the chainable recursive form), in plain Python."""
    lrs, lr = [base], base
    for e in range(1, epochs + 1):
        if (e - 1 - T_max) % (2 * T_max) == 0:
            lr = lr + (base - eta_min) * (1 - math.cos(math.pi / T_max)) / 2
        else:
            lr = (1 + math.cos(math.pi * e / T_max)) / (1 + math.cos(math.pi * (e - 1) / T_max)) * \
                (lr - eta_min) + eta_min
        lrs.append(lr)
    return lrs


@pytest.mark.parametrize("T_max, eta_min", [(10, 0.0), (7, 0.01), (1, 0.001)])
def test_cosine_closed_form_equals_pytorchs_recursion(T_max, eta_min):
    got = lrs_over(S.CosineAnnealingLR(optimizer(), T_max=T_max, eta_min=eta_min), 3 * T_max)
    expected = cosine_recursive(0.1, eta_min, T_max, 3 * T_max)
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-9, atol=1e-15)
    assert got[T_max, 0] == pytest.approx(eta_min, abs=1e-15)


def test_linear_lr():
    got = lrs_over(S.LinearLR(optimizer(), start_factor=0.25, end_factor=1.0, total_iters=4), 8)
    factors = [0.25 + 0.75 * min(e, 4) / 4 for e in range(9)]
    np.testing.assert_allclose(got[:, 0], [0.1 * f for f in factors], rtol=1e-14)
    with pytest.raises(ValueError, match="start_factor"):
        S.LinearLR(optimizer(), start_factor=0)


def test_reduce_on_plateau_patience_threshold_cooldown_min_lr():
    opt = optimizer()
    sched = S.ReduceLROnPlateau(opt, factor=0.5, patience=2, cooldown=1, min_lr=0.02)
    metrics = [1.0, 0.99995, 0.9999, 0.9999, 0.9999, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    lrs = []
    for m in metrics:
        sched.step(m)
        lrs.append(sched.get_last_lr()[0])
    # Improvement means below best * (1 - 1e-4) = 0.9999, strictly: epochs 2-4 are bad, the third
    # bad one (> patience) halves the lr; the next epoch is cooldown (not counted); 0.5 is a new best,
    # then three bad epochs halve again, and the next reduction stops at min_lr.
    expected = [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025, 0.02, 0.02]
    np.testing.assert_allclose(lrs, expected, rtol=1e-15)
    sched_max = S.ReduceLROnPlateau(optimizer(), mode="max", patience=0, threshold=0.1, threshold_mode="abs")
    sched_max.step(1.0)
    sched_max.step(1.05)          # not > 1.0 + 0.1
    assert sched_max.get_last_lr() == [pytest.approx(0.01)]
    with pytest.raises(ValueError, match="mode"):
        S.ReduceLROnPlateau(opt, mode="best")


def test_scheduler_state_dict_round_trip():
    sched = S.CosineAnnealingLR(optimizer(), T_max=10)
    lrs_over(sched, 3)
    state = sched.state_dict()
    assert state["last_epoch"] == 3 and "optimizer" not in state
    opt = optimizer()          # the lr lives in the optimizer (chainable forms read it): load both
    opt.load_state_dict(sched.optimizer.state_dict())
    other = S.CosineAnnealingLR(opt, T_max=10)
    other.load_state_dict(state)
    other.step()
    sched.step()
    assert other.get_last_lr() == sched.get_last_lr()


def test_schedulers_match_torch():
    torch = pytest.importorskip("torch")
    makers = [
        (lambda o: S.StepLR(o, 3, 0.3), lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.3)),
        (lambda o: S.ExponentialLR(o, 0.8), lambda o: torch.optim.lr_scheduler.ExponentialLR(o, 0.8)),
        (lambda o: S.CosineAnnealingLR(o, 6, 0.01),
         lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 6, 0.01)),
        (lambda o: S.LinearLR(o, 0.2, 0.9, 5), lambda o: torch.optim.lr_scheduler.LinearLR(o, 0.2, 0.9, 5)),
    ]
    for ours, theirs in makers:
        opt = optimizer((0.1, 0.5))
        topt = torch.optim.SGD([{"params": [torch.zeros(2, requires_grad=True)], "lr": lr}
                                for lr in (0.1, 0.5)])
        a, b = ours(opt), theirs(topt)
        for _ in range(20):
            np.testing.assert_allclose(a.get_last_lr(), b.get_last_lr(), rtol=1e-12)
            opt.step()
            topt.step()
            a.step()
            b.step()
    opt = optimizer()
    topt = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1)
    a = S.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=2, min_lr=0.01)
    b = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, factor=0.5, patience=1, cooldown=2, min_lr=0.01)
    for m in np.random.default_rng(0).uniform(0.9, 1.0, 40) + np.linspace(0, -0.2, 40):
        a.step(m)
        b.step(m)
        assert a.get_last_lr() == pytest.approx(b.get_last_lr(), rel=1e-15)
