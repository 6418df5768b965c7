"""Checkpoints (issue 12): tt.save / tt.load round trips (types, dtypes, keys), the refusal of
anything that needs pickle, and a bit-identical resume of model + optimizer + scheduler + epoch."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn


def test_round_trip_keeps_types_dtypes_and_keys(tmp_path):
    obj = {
        "arrays": [np.arange(5, dtype=np.int16), np.ones((2, 3), np.float32), np.array(2.5),
                   np.array(["a", "bc"]), np.zeros((0, 3)), np.array([1 + 2j])],
        3: {"nested": (1, 2.0, "three", None, True, [])},
        (1, "x"): np.float32(0.1),
        2.5: float("inf"),
        "big": 2 ** 100,
        "nan": float("nan"),
        "tensor": tt.tensor([1.0, 2.0], requires_grad=True),
    }
    path = tmp_path / "c.npz"
    tt.save(obj, path)
    back = tt.load(path)
    assert list(back) == list(obj)
    for a, b in zip(back["arrays"], obj["arrays"]):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert back[3] == {"nested": (1, 2.0, "three", None, True, [])}
    assert type(back[3]["nested"][0]) is int and type(back[3]["nested"][4]) is bool
    assert isinstance(back[(1, "x")], np.float32) and back[(1, "x")] == np.float32(0.1)
    assert back[2.5] == float("inf") and back["big"] == 2 ** 100 and np.isnan(back["nan"])
    assert isinstance(back["tensor"], tt.Tensor) and back["tensor"].requires_grad
    tt.save([1, "a"], tmp_path / "plain")                # NumPy adds .npz
    assert tt.load(tmp_path / "plain.npz") == [1, "a"]


def test_state_dicts_round_trip(tmp_path):
    model = nn.Sequential(nn.Conv2d(1, 2, 3, rng=0), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 2, rng=1))
    opt = tt.optim.AdamW(model.parameters(), lr=0.01)
    loss = nn.CrossEntropyLoss()(model(np.ones((3, 1, 4, 4))), np.array([0, 1, 1]))
    loss.backward()
    opt.step()
    tt.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "c.npz")
    back = tt.load(tmp_path / "c.npz")
    for k, v in model.state_dict().items():
        assert back["model"][k].dtype == v.dtype
        np.testing.assert_array_equal(back["model"][k], v)
    assert back["opt"]["state"][0]["step"] == 1 and isinstance(back["opt"]["state"][0]["step"], int)
    assert back["opt"]["param_groups"][0]["betas"] == (0.9, 0.999)


def test_load_refuses_pickle_and_save_refuses_objects(tmp_path):
    structure = np.array('{"format": "tinytensor-checkpoint-1", "root": {"array": "a0"}}')
    np.savez(tmp_path / "evil.npz", __structure__=structure, a0=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ValueError, match="pickle"):
        tt.load(tmp_path / "evil.npz")
    np.savez(tmp_path / "foreign.npz", x=np.ones(2))
    with pytest.raises(ValueError, match="not a tinytensor checkpoint"):
        tt.load(tmp_path / "foreign.npz")
    with pytest.raises(TypeError, match="object array"):
        tt.save({"a": np.array([None, 1], dtype=object)}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="state_dict"):
        tt.save({"model": nn.Linear(2, 2)}, tmp_path / "x.npz")


def _train(model, opt, sched, X, y, epochs, start=0):
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(start, epochs):
        rng = np.random.default_rng(epoch)            # the data order is a function of the epoch
        for xb, yb in tt.data.minibatches(X, y, batch_size=16, rng=rng):
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()


def _setup():
    model = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1, rng=0), nn.BatchNorm2d(3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.2, rng=5), nn.Linear(12, 3, rng=1))
    opt = tt.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-3)
    sched = tt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    return model, opt, sched


def test_resume_from_a_checkpoint_is_bit_identical(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((64, 1, 4, 4)).astype(np.float32), rng.integers(0, 3, 64)
    model, opt, sched = _setup()
    _train(model, opt, sched, X, y, epochs=5)
    straight = model.state_dict()

    model, opt, sched = _setup()
    _train(model, opt, sched, X, y, epochs=3)
    dropout = model[5]
    tt.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
             "epoch": 3, "dropout_rng": dropout.rng.bit_generator.state}, tmp_path / "ckpt.npz")

    model, opt, sched = _setup()                     # a fresh process would start here
    ckpt = tt.load(tmp_path / "ckpt.npz")
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    sched.load_state_dict(ckpt["sched"])
    model[5].rng.bit_generator.state = ckpt["dropout_rng"]
    assert opt.param_groups[0]["lr"] == sched.get_last_lr()[0] == 0.005
    _train(model, opt, sched, X, y, epochs=5, start=ckpt["epoch"])
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, straight[name], err_msg=name)
