"""The silent cases of issue 31: positional std/var, integer casts and gradients, chained
schedulers. Each failed (gave a wrong number without a word) before its fix."""

import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

X = np.random.default_rng(0).normal(size=(4, 5))


@pytest.mark.parametrize("name", ["std", "var"])
@pytest.mark.parametrize("call", [lambda t, n: getattr(t, n)(), lambda t, n: getattr(t, n)(0),
                                  lambda t, n: getattr(t, n)(-1, keepdims=True)])
def test_ambiguous_std_var_warns_naming_both_spellings(name, call):
    t = tt.tensor(X)
    with pytest.warns(UserWarning, match=r"ddof=0.*correction=1"):
        out = call(t, name)
    # the documented meaning (tt.* and its methods keep NumPy's): the biased estimate
    ref = call(X, name)
    np.testing.assert_allclose(out.data, ref)


@pytest.mark.parametrize("name", ["std", "var"])
def test_explicit_std_var_spellings_are_silent_and_right(name):
    t = tt.tensor(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(getattr(t, name)(axis=0).data, getattr(X, name)(axis=0))
        np.testing.assert_allclose(getattr(t, name)(0, ddof=0).data, getattr(X, name)(0))
        np.testing.assert_allclose(getattr(t, name)(dim=0).data, getattr(X, name)(0, ddof=1))
        np.testing.assert_allclose(getattr(t, name)(-1, correction=1).data, getattr(X, name)(-1, ddof=1))
        np.testing.assert_allclose(getattr(t, name)(0, unbiased=False).data, getattr(X, name)(0))
        np.testing.assert_allclose(getattr(tt, name)(t, 0).data, getattr(X, name)(0))
        np.testing.assert_allclose(getattr(np, name)(t, 0).data, getattr(X, name)(0))


@pytest.mark.parametrize("cast", ["long", "int", "bool"])
def test_integer_casts_never_require_grad(cast):
    x = tt.tensor([0.5, 2.0], requires_grad=True)
    y = getattr(x, cast)()
    assert not y.requires_grad and y.is_leaf
    assert y.dtype.kind in "iub"
    z = x.float()                 # a float cast stays on the tape, as PyTorch's
    assert z.requires_grad


# ----- torch objects handed over (duck-typed stand-ins: torch is not needed) ----------------------
class _FakeDtype:
    __module__ = "torch"

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


_FakeDtype.__module__ = "torch"


class FakeTorchTensor:
    """What tinytensor may use of a torch.Tensor: detach().cpu().numpy(), dtype."""

    def __init__(self, a):
        self.a = np.asarray(a)
        self.dtype = _FakeDtype(str(self.a.dtype))

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.a

    def __array__(self, *args, **kwargs):
        raise AssertionError("converted through __array__ (torch warns, and may be on the GPU)")


FakeTorchTensor.__module__ = "torch"


def test_tensor_and_load_state_dict_accept_torch_tensors():
    t = tt.tensor(FakeTorchTensor(np.arange(3.0)), requires_grad=True)
    np.testing.assert_array_equal(t.data, [0.0, 1.0, 2.0])
    lin = nn.Linear(2, 3, rng=0, dtype=np.float64)
    sd = {k: FakeTorchTensor(np.full(v.shape, 0.5)) for k, v in lin.state_dict().items()}
    lin.load_state_dict(sd)
    np.testing.assert_array_equal(lin.weight.data, np.full((3, 2), 0.5))


@pytest.mark.parametrize("name,want", [("float32", np.float32), ("float64", np.float64),
                                       ("int64", np.int64), ("bool", np.bool_), ("float16", np.float16)])
def test_torch_dtypes_accepted(name, want):
    d = _FakeDtype(name)
    assert tt.tensor([1.0, 2.0]).to(d).dtype == want
    assert tt.tensor([1.0, 2.0], dtype=d).dtype == want
    assert tt.tensor([1.0], dtype=f"torch.{name}").dtype == want
    if np.dtype(want).kind == "f":
        assert next(nn.Linear(2, 2).to(d).parameters()).dtype == want


def test_unknown_torch_dtype_is_refused_by_name():
    with pytest.raises(TypeError, match="torch.bfloat16 has no NumPy"):
        tt.tensor([1.0]).to(_FakeDtype("bfloat16"))


def test_loading_a_torch_file_names_the_conversion(tmp_path):
    import pickle
    import zipfile
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as z:        # torch.save's layout: archive/data.pkl
        z.writestr("archive/data.pkl", pickle.dumps({"w": 1}))
    with pytest.raises(ValueError, match=r"torch.load\(.*\n.*tt.save\("):
        tt.load(str(path))
    legacy = tmp_path / "old.pt"
    legacy.write_bytes(pickle.dumps({"w": 1}))
    with pytest.raises(ValueError, match="torch.save"):
        tt.load(str(legacy))


def test_torch_tensors_as_labels_and_indices():
    logits = tt.tensor(np.random.default_rng(0).normal(size=(3, 4)), requires_grad=True)
    y = FakeTorchTensor(np.array([0, 3, 1]))
    loss = nn.CrossEntropyLoss()(logits, y)
    want = nn.CrossEntropyLoss()(logits, np.array([0, 3, 1]))
    assert loss.item() == want.item()
    np.testing.assert_array_equal(logits[FakeTorchTensor(np.array([2, 0]))].data, logits.data[[2, 0]])
    emb = nn.Embedding(5, 2, rng=0)
    np.testing.assert_array_equal(emb(FakeTorchTensor(np.array([4, 1]))).data, emb.weight.data[[4, 1]])


# ----- schedulers compose as PyTorch's chainable forms ----------------------------------------------
def _opt(lr=1.0):
    return tt.optim.SGD([tt.tensor(np.zeros(2), requires_grad=True)], lr=lr)


def _run(make, steps):
    opt = _opt()
    scheds = make(opt)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        for s in scheds:
            s.step()
        lrs.append(opt.param_groups[0]["lr"])
    return np.array(lrs)


def test_cosine_chained_with_a_step_decay_keeps_the_decay():
    S = tt.optim.lr_scheduler
    alone = _run(lambda o: [S.CosineAnnealingLR(o, T_max=10)], 9)
    both = _run(lambda o: [S.StepLR(o, step_size=3, gamma=0.1), S.CosineAnnealingLR(o, T_max=10)], 9)
    # before the decay they agree; after it, PyTorch's chainable forms give 0.1 x the cosine
    np.testing.assert_allclose(both[:3], alone[:3], rtol=1e-12)
    np.testing.assert_allclose(both[3:6], 0.1 * alone[3:6], rtol=1e-12)
    np.testing.assert_allclose(both[6:9], 0.01 * alone[6:9], rtol=1e-12)
    chain = lambda o: [S.ChainedScheduler([S.ExponentialLR(o, 0.9), S.CosineAnnealingLR(o, T_max=10)])]  # noqa: E731
    chained = _run(chain, 9)
    np.testing.assert_allclose(chained, alone * 0.9 ** np.arange(10), rtol=1e-12)


def test_cosine_alone_is_the_closed_form_through_a_restart():
    S = tt.optim.lr_scheduler
    lrs = _run(lambda o: [S.CosineAnnealingLR(o, T_max=4, eta_min=0.1)], 12)
    t = np.arange(13)
    np.testing.assert_allclose(lrs, 0.1 + 0.9 * (1 + np.cos(np.pi * t / 4)) / 2, atol=1e-12)
