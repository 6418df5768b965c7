"""LambdaLR, MultiStepLR, OneCycleLR, SequentialLR and ChainedScheduler against sequences stored
from PyTorch 2.x (SGD or Adam, lr=0.1; the lr read before each optimizer step), and the
documented formulas."""

import math

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.optim import lr_scheduler as L

TORCH = {
    "LAMBDA": [0.1, 0.10500000000000001, 0.11025000000000001, 0.1157375, 0.12145062499999999,
               0.12737809374999998],
    "MULTISTEP": [0.1, 0.1, 0.05, 0.05, 0.05, 0.0125, 0.0125, 0.0125],
    "ONECYCLE_SGD_LR": [0.040000000000000036, 0.52, 1.0, 0.9504846320134737, 0.8117456539497631,
                        0.6112620219362893, 0.38874197806371075, 0.18825834605023697,
                        0.049519367986526286, 4e-06],
    "ONECYCLE_SGD_MOMENTUM": [0.95, 0.8999999999999999, 0.85, 0.854951556604879, 0.8688255099070633,
                              0.8888739533021842, 0.9111260466978157, 0.9311744900929366,
                              0.945048443395121, 0.95],
    "ONECYCLE_ADAM3_LR": [0.02, 0.20461538461538464, 0.3892307692307693, 0.4261538461538461,
                          0.24153846153846148, 0.0569230769230768, 0.01724165517241379,
                          0.013793724137931033, 0.010345793103448273, 0.006897862068965515,
                          0.0034499310344827568, 1.9999999999985307e-06],
    "ONECYCLE_ADAM3_BETA1": [0.95, 0.9115384615384615, 0.8730769230769231, 0.8653846153846154,
                             0.9038461538461539, 0.9423076923076923, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95],
    "SEQ": [0.010000000000000002, 0.04, 0.07, 0.1, 0.08535533905932738, 0.05, 0.014644660940672627,
            0.0, 0.014644660940672622],
    "SEQ3": [0.1, 0.05, 0.1, 0.1, 0.010000000000000002, 0.1, 0.010000000000000002,
             0.0010000000000000002, 0.0010000000000000002],
    "CHAIN": [0.05, 0.07500000000000001, 0.1, 0.010000000000000002, 0.010000000000000002,
              0.010000000000000002],
    "TWO": [0.1, 0.09000000000000001, 0.04050000000000001, 0.03645000000000001, 0.03280500000000001],
}


def _run(make, n, opt_cls=tt.optim.SGD, **options):
    p = tt.tensor(np.zeros(1), requires_grad=True)
    opt = opt_cls([p], lr=0.1, **options)
    sched = make(opt)
    lrs, momenta = [], []
    for _ in range(n):
        group = opt.param_groups[0]
        lrs.append(group["lr"])
        momenta.append(group["betas"][0] if "betas" in group else group.get("momentum"))
        p.grad = np.ones(1)
        opt.step()
        sched.step()
    return lrs, momenta


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_lambda_lr():
    close(_run(lambda o: L.LambdaLR(o, lambda e: 0.95 ** e + e / 10), 6)[0], TORCH["LAMBDA"])


def test_lambda_lr_per_group_and_state_dict_without_functions():
    a, b = tt.tensor([1.0], requires_grad=True), tt.tensor([1.0], requires_grad=True)
    opt = tt.optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    s = L.LambdaLR(opt, [lambda e: 1.0, lambda e: 0.5 ** e])
    s.step()
    s.step()
    assert s.get_last_lr() == [0.1, 0.25]
    assert "lr_lambdas" not in s.state_dict() and s.state_dict()["last_epoch"] == 2
    with pytest.raises(ValueError, match="expected 2 values of lr_lambda"):
        L.LambdaLR(opt, [lambda e: 1.0])


def test_multistep_lr():
    close(_run(lambda o: L.MultiStepLR(o, [2, 5, 5], gamma=0.5), 8)[0], TORCH["MULTISTEP"])
    with pytest.raises(ValueError, match="increasing"):
        _run(lambda o: L.MultiStepLR(o, [5, 2]), 1)


def test_one_cycle_sgd_cycles_momentum_with_pytorch_defaults():
    lrs, momenta = _run(lambda o: L.OneCycleLR(o, max_lr=1.0, total_steps=10), 10, momentum=0.9)
    close(lrs, TORCH["ONECYCLE_SGD_LR"])
    close(momenta, TORCH["ONECYCLE_SGD_MOMENTUM"])
    # the documented ends: max_lr / div_factor, max_lr at pct_start, / final_div_factor at the end
    assert math.isclose(lrs[0], 1.0 / 25) and lrs[2] == 1.0 and math.isclose(lrs[-1], 1.0 / 25 / 1e4)


def test_one_cycle_adam_three_phase_linear_cycles_beta1():
    lrs, beta1 = _run(lambda o: L.OneCycleLR(o, max_lr=0.5, total_steps=12, three_phase=True,
                                             anneal_strategy="linear"), 12, tt.optim.Adam)
    close(lrs, TORCH["ONECYCLE_ADAM3_LR"])
    close(beta1, TORCH["ONECYCLE_ADAM3_BETA1"])


def test_one_cycle_errors():
    with pytest.raises(ValueError, match="tried to step 4 times; total_steps is 3"):
        _run(lambda o: L.OneCycleLR(o, max_lr=1.0, total_steps=3), 5)
    with pytest.raises(ValueError, match="total_steps, or both epochs and steps_per_epoch"):
        _run(lambda o: L.OneCycleLR(o, max_lr=1.0), 1)
    lrs, _ = _run(lambda o: L.OneCycleLR(o, max_lr=1.0, epochs=2, steps_per_epoch=5), 10, momentum=0.9)
    close(lrs, TORCH["ONECYCLE_SGD_LR"])


def test_sequential_warmup_then_cosine():
    def make(o):
        return L.SequentialLR(o, [L.LinearLR(o, start_factor=0.1, total_iters=3),
                                  L.CosineAnnealingLR(o, T_max=4)], milestones=[3])
    close(_run(make, 9)[0], TORCH["SEQ"])


def test_sequential_three_schedulers_restart_at_milestones():
    def make(o):
        return L.SequentialLR(o, [L.ExponentialLR(o, gamma=0.5), L.StepLR(o, 2, 0.1),
                                  L.MultiStepLR(o, [1, 2])], milestones=[2, 5])
    close(_run(make, 9)[0], TORCH["SEQ3"])
    with pytest.raises(ValueError, match="expected 1 milestones for 2 schedulers"):
        _run(lambda o: L.SequentialLR(o, [L.StepLR(o, 2), L.StepLR(o, 3)], milestones=[]), 1)


def test_chained_and_two_schedulers_on_one_optimizer_compose():
    def chained(o):
        return L.ChainedScheduler([L.LinearLR(o, start_factor=0.5, total_iters=2),
                                   L.MultiStepLR(o, [3], 0.1)])
    close(_run(chained, 6)[0], TORCH["CHAIN"])

    def two(o):
        a, b = L.MultiStepLR(o, [2], 0.5), L.ExponentialLR(o, 0.9)

        class Both:
            def step(self):
                a.step()
                b.step()
        return Both()
    close(_run(two, 5)[0], TORCH["TWO"])


def test_sequential_state_dict_round_trip():
    def make(o):
        return L.SequentialLR(o, [L.LinearLR(o, start_factor=0.1, total_iters=3),
                                  L.CosineAnnealingLR(o, T_max=4)], milestones=[3])
    p = tt.tensor([0.0], requires_grad=True)
    opt = tt.optim.SGD([p], lr=0.1)
    s = make(opt)
    for _ in range(4):
        s.step()
    state = s.state_dict()
    opt2 = tt.optim.SGD([tt.tensor([0.0], requires_grad=True)], lr=0.1)
    s2 = make(opt2)
    s2.load_state_dict(state)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    s.step()
    s2.step()
    assert s.get_last_lr() == s2.get_last_lr() == [TORCH["SEQ"][5]]


def test_torch_live_comparison():
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
    s = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.3, total_steps=17, pct_start=0.25)
    ref = []
    for _ in range(17):
        ref.append((opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]))
        opt.step()
        s.step()
    lrs, momenta = _run(lambda o: L.OneCycleLR(o, max_lr=0.3, total_steps=17, pct_start=0.25), 17,
                        momentum=0.9)
    close(lrs, [r[0] for r in ref])
    close(momenta, [r[1] for r in ref])
