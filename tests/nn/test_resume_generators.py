"""Reproducible resumes (issue 23 item 5): a Dropout's own generator is in its state_dict, and the
global generator's state (tt.get_rng_state) covers the rest, so save -> load -> resume is
bit-identical to an uninterrupted run."""

import numpy as np

import tinytensor as tt
from tinytensor import nn


def make(seed_dropout):
    return nn.Sequential(nn.Linear(6, 16, rng=0), nn.ReLU(), nn.Dropout(0.3, rng=seed_dropout),
                         nn.Linear(16, 3, rng=1))


def steps(model, opt, n, data):
    losses = []
    for i in range(n):
        x, y = data[i % len(data)]
        loss = nn.CrossEntropyLoss()(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def batches():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8)) for _ in range(4)]


def test_a_dropouts_own_generator_is_in_the_state_dict_and_resume_is_bit_identical(tmp_path):
    data = batches()
    model = make(7)
    opt = tt.optim.AdamW(model.parameters(), lr=0.01)
    straight = steps(model, opt, 10, data)

    model = make(7)
    opt = tt.optim.AdamW(model.parameters(), lr=0.01)
    first = steps(model, opt, 4, data)
    assert "2.rng" in model.state_dict() and model.state_dict()["2.rng"].dtype == np.uint64
    tt.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "ckpt.npz")
    resumed = make(99)                                     # another seed: the checkpoint decides
    opt2 = tt.optim.AdamW(resumed.parameters(), lr=0.01)
    ckpt = tt.load(tmp_path / "ckpt.npz")
    resumed.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["opt"])
    rest = steps(resumed, opt2, 6, data[4 % 4:] + data[:4 % 4])
    assert first + rest == straight                        # bit-identical, not merely close


def test_the_global_generator_covers_dropout_without_rng(tmp_path):
    data = batches()
    tt.manual_seed(0)
    model = make(None)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    assert not any(k.endswith("rng") for k in model.state_dict())      # owns no generator
    start = model.state_dict()
    straight = steps(model, opt, 6, data)

    model.load_state_dict(start)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    tt.manual_seed(0)
    make(None)                                             # the same draws as before the first run
    first = steps(model, opt, 3, data)
    tt.save({**model.state_dict(), "rng": tt.get_rng_state()}, tmp_path / "c.safetensors")
    tt.manual_seed(12345)                                  # anything in between
    tt.randn(10)
    ckpt = tt.load(tmp_path / "c.safetensors")
    resumed = make(None)
    resumed.load_state_dict({k: v for k, v in ckpt.items() if k != "rng"})
    tt.set_rng_state(ckpt["rng"])
    opt2 = tt.optim.SGD(resumed.parameters(), lr=0.1)      # SGD without momentum: no state to carry
    assert first + steps(resumed, opt2, 3, data[3:] + data[:3]) == straight


def test_a_pytorch_state_dict_without_generators_still_loads():
    model = make(3)
    state = {k: v for k, v in make(4).state_dict().items() if not k.endswith("rng")}
    before = model.state_dict()["2.rng"]
    model.load_state_dict(state)                           # strict: the generator key is optional
    np.testing.assert_array_equal(model.state_dict()["2.rng"], before)
