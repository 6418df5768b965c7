"""No code path pins NumPy: everything runs on a stand-in for another array library, on the CPU.

tests/foreign.py registers the device "foreign": arrays that reach NumPy's functions only through
NumPy's dispatch protocols and refuse silent conversion to NumPy arrays and mixing with them,
as CuPy's do. What passes here runs on CuPy, short of functions CuPy lacks (tests/devices/test_gpu.py).
A failing row of the op sweep is named in the test id: `test_op_rows_on_another_device[<row>-<case>-<dtype>]`.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from device_sweep import (
    OPTIMIZERS,
    check_case,
    check_cnn,
    check_more_layers_and_losses,
    check_out_of_range_labels,
    check_training,
    check_transforms,
    readme_gpu_example,
    sweep_params,
)
from foreign import NAME, ForeignArray

import tinytensor as tt
from tinytensor import backend


def on(x, dtype=None):
    return backend.to_device(np.asarray(x, dtype=dtype), NAME)


@pytest.mark.parametrize("name, index, dtype", sweep_params())
def test_op_rows_on_another_device(name, index, dtype):
    check_case(name, index, NAME, dtype)


# ----- the stand-in itself: it must catch what CuPy catches ---------------------------------------
def test_the_stand_in_refuses_numpy_like_cupy():
    f = on([1.0, 2.0])
    with pytest.raises(TypeError):
        np.asarray(f)
    with pytest.raises(TypeError):
        f + np.ones(2)
    with pytest.raises(TypeError):
        import scipy.special
        scipy.special.expit(f)
    assert isinstance(np.exp(f), ForeignArray) and isinstance(f.sum(), ForeignArray)
    assert isinstance(f * 2.0 + np.float32(1), ForeignArray)


# ----- Tensors on a device ------------------------------------------------------------------------
def test_tensor_device_creation_and_moves():
    x = tt.tensor([[1.0, 2.0], [3.0, 4.0]], device=NAME)
    assert x.device == NAME and isinstance(x.data, ForeignArray)
    assert tt.tensor(x.data).device == NAME                  # a device array stays there
    assert tt.tensor(x.data, dtype=np.float32).dtype == np.float32
    assert tt.tensor([1.0]).device == "cpu"
    for t in (tt.zeros(2, 3, device=NAME), tt.ones((2,), device=NAME, dtype=np.float32),
              tt.randn(3, rng=0, device=NAME, requires_grad=True)):
        assert t.device == NAME
    np.testing.assert_array_equal(tt.randn(3, rng=0, device=NAME).cpu().numpy(), tt.randn(3, rng=0).numpy())
    back = x.cpu()
    assert back.device == "cpu" and type(back.data) is np.ndarray
    np.testing.assert_array_equal(back.numpy(), [[1.0, 2.0], [3.0, 4.0]])
    assert x.to(NAME) is x and back.to("cpu") is back
    assert x.to(np.float32).dtype == np.float32 and x.to(np.float32).device == NAME
    assert "device='foreign'" in repr(x)


def test_more_moves_and_edge_cases():
    f = tt.tensor([1.0, 2.0], device=NAME)
    assert tt.tensor(f).device == NAME and tt.tensor(f).data is not f.data      # a copy, still there
    host = tt.tensor(f.data, device="cpu")                                     # an explicit copy home
    assert type(host.data) is np.ndarray and host.data.tolist() == [1.0, 2.0]
    assert tt.tensor(np.ones(2), device=NAME, dtype=np.float32).dtype == np.float32
    both = f.to("cpu", np.float32)
    assert both.device == "cpu" and both.dtype == np.float32
    assert tt.nn.Linear(2, 2, rng=0).to(np.float64).W.dtype == np.float64
    s = tt.tensor(3.0, requires_grad=True, device=NAME)                        # 0-d
    (s * s).backward()
    assert isinstance(s.grad, ForeignArray) and s.grad.shape == () and float(s.grad) == 6.0
    with pytest.raises(ValueError, match="cuda:1"):
        tt.tensor([1.0], device="cuda:1")
    xs = tt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True, device=NAME)
    out = tt.concatenate([xs[:, -1:], xs[:, :1]], axis=-1).max(axis=-1).sum()   # negative axes
    out.backward()
    np.testing.assert_array_equal(backend.to_host(xs.grad), [[0, 0, 1], [0, 0, 1]])


def test_a_device_tensor_never_becomes_numpy_silently():
    x = tt.tensor([1.0, 2.0], device=NAME)
    with pytest.raises(TypeError, match=r"cpu\(\)"):
        x.numpy()
    with pytest.raises(TypeError, match=r"cpu\(\)"):
        np.asarray(x)
    assert x.sum().item() == 3.0 and float(x[0]) == 1.0


def test_gradients_flow_across_devices():
    x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)       # a CPU leaf
    y = x.to(NAME)
    loss = (y * y).sum()
    assert loss.device == NAME
    loss.backward()
    assert x.grad is not None and type(x.grad) is np.ndarray
    np.testing.assert_allclose(x.grad, [2.0, 4.0, 6.0])
    w = tt.tensor([1.0, -2.0], requires_grad=True, device=NAME)
    w.cpu().sum().backward()
    assert isinstance(w.grad, ForeignArray)
    np.testing.assert_array_equal(w.grad.get(), [1.0, 1.0])
    tangent = (x.to(NAME) * 2).jvp({x: np.ones(3)})
    np.testing.assert_array_equal(tangent.get(), [2.0, 2.0, 2.0])


def test_mixing_devices_raises_naming_both():
    cpu = tt.tensor([1.0, 2.0], requires_grad=True)
    dev = tt.tensor([1.0, 2.0], device=NAME)
    for operation in (lambda: cpu + dev, lambda: dev * cpu, lambda: tt.matmul(cpu, dev),
                      lambda: dev + np.ones(2)):
        with pytest.raises(TypeError, match=r"different devices \(cpu and foreign\)"):
            operation()
    y = (dev * 2).sum()
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()
    d = tt.tensor([1.0, 2.0], requires_grad=True, device=NAME)
    out = d * 3
    with pytest.raises(TypeError, match=r"backward's grad: on device 'cpu' but must be on 'foreign'"):
        out.backward(np.ones(2))
    with pytest.raises(TypeError, match=r"tangent .*: on device 'cpu' but must be on 'foreign'"):
        out.jvp({d: np.ones(2)})
    out.backward([1.0, 1.0])              # a list is made on the output's device
    np.testing.assert_array_equal(d.grad.get(), [3.0, 3.0])


def test_numbers_mix_with_device_tensors():
    x = tt.tensor([1.0, 2.0], requires_grad=True, device=NAME, dtype=np.float32)
    y = 2.0 * x + np.float32(1) - x ** 2 / 3
    assert y.device == NAME and y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32 and isinstance(x.grad, ForeignArray)


def test_unknown_devices_and_missing_cupy_are_clear_errors():
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        tt.tensor([1.0], device="tpu")
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match=r"needs CuPy: pip install -e \"\.\[gpu\]\""):
            tt.zeros(2, device="cuda")


def test_cpu_users_never_import_cupy():
    code = ("import sys, numpy as np, tinytensor as tt\n"
            "x = tt.tensor(np.ones((2, 3)), requires_grad=True)\n"
            "(tt.sigmoid(x @ np.ones((3, 2))).sum() + tt.frobenius_norm(x)).backward()\n"
            "print(x.device, x.cpu() is x)\n"
            "assert 'cupy' not in sys.modules, 'cupy was imported'\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["cpu", "True"]


# ----- checks, transforms, nn, optim, data on a device ----------------------------------------------
def test_gradcheck_and_numerical_grad_on_a_device():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    f = lambda x, w: tt.softmax_cross_entropy(tt.tanh(x @ w), [0, 1, 1])   # a list: made on x's device
    assert tt.gradcheck(f, on(a), on(b))
    numerical = tt.numerical_grad(f, on(a), on(b))
    assert all(isinstance(n, ForeignArray) for n in numerical)
    for n, ref in zip(numerical, tt.numerical_grad(f, a, b)):
        np.testing.assert_allclose(n.get(), ref, rtol=1e-12, atol=1e-14)
    with pytest.raises(tt.GradcheckError):
        bad = tt.primitive(lambda x: x * 2.0, name="bad_double_on_device")
        bad.defvjp(lambda g, ans, x: g * 3.0)
        bad.defjvp(lambda t, ans, x: t * 2.0)
        tt.gradcheck(bad, on(a))
    tt.REGISTRY.pop("bad_double_on_device")


def test_out_of_range_labels_give_nan_on_a_device():
    for bad in (-1, 3, 10**6):
        check_out_of_range_labels(NAME, bad)
    with pytest.raises(IndexError, match=r"class indices must lie in \[0, 3\)"):
        tt.softmax_cross_entropy(tt.tensor(np.zeros((2, 3))), np.array([0, -1]))


def test_transforms_on_a_device():
    check_transforms(NAME)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_mlp_training_on_a_device_matches_the_cpu(optimizer):
    check_training(NAME, optimizer)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_cnn_training_on_a_device_matches_the_cpu(optimizer):
    """Conv2d, pools, BatchNorm, Dropout, the losses' options, every optimizer and a schedule."""
    check_cnn(NAME, optimizer, rtol=1e-5, atol=1e-6)     # NumPy underneath: float32 rounding apart


def test_more_layers_losses_and_clipping_on_a_device():
    check_more_layers_and_losses(NAME, rtol=1e-5)


def test_cross_entropy_with_the_class_axis_first_has_the_right_gradient_on_the_cpu():
    """Found by the device comparison: the fused VJP wrote the label term into a reshape copy
    when the probabilities were not C-contiguous ((N, C, d) logits), so it was lost."""
    rng = np.random.default_rng(0)
    z, y = rng.standard_normal((2, 3, 4)), rng.integers(0, 3, (2, 4))
    f = lambda z: tt.nn.CrossEntropyLoss()(z, y)
    t = tt.tensor(z, requires_grad=True)
    f(t).backward()
    np.testing.assert_allclose(t.grad, tt.numerical_grad(f, z)[0], atol=1e-7)


def test_checkpoints_of_a_device_model_save_and_load(tmp_path):
    """tt.save copies device arrays home; loading puts them back on the parameters' device."""
    model = tt.nn.Sequential(tt.nn.Linear(3, 2, rng=0), tt.nn.BatchNorm1d(2)).to(NAME)
    opt = tt.optim.Adam(model.parameters(), lr=0.1)
    model(on(np.ones((4, 3), np.float32))).sum().backward()
    opt.step()
    path = str(tmp_path / "ckpt.npz")
    tt.save({"model": model.state_dict(), "opt": opt.state_dict(), "w": model[0].weight}, path)
    ckpt = tt.load(path)
    assert type(ckpt["w"].data) is np.ndarray
    fresh = tt.nn.Sequential(tt.nn.Linear(3, 2, rng=1), tt.nn.BatchNorm1d(2)).to(NAME)
    fresh_opt = tt.optim.Adam(fresh.parameters(), lr=0.1)
    fresh.load_state_dict(ckpt["model"])
    fresh_opt.load_state_dict(ckpt["opt"])
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert isinstance(b, ForeignArray), name
        np.testing.assert_array_equal(a.get(), b.get(), err_msg=name)
    state = fresh_opt.state_dict()["state"]
    assert all(isinstance(v, ForeignArray) for s in state.values() for v in s.values()
               if backend.is_array(v))


def test_a_device_without_a_scipy_function_is_a_clear_error():
    class Bare(ForeignArray):
        __slots__ = ()
    xp = backend.get_device(NAME).xp
    backend.register_device("bare", Bare, xp, from_host=lambda a: Bare(np.array(a)),
                            to_host=lambda b: b.get())
    try:
        x = Bare(np.array([0.5, -1.0]))
        assert backend.device_of(x) == "bare"
        with pytest.raises(TypeError, match=r"erf on device 'bare': its array library has no erf"):
            backend.erf(x)          # what tt.erf's forward and gelu's rules call off NumPy
        with pytest.raises(TypeError, match="unknown functions"):
            backend.register_device("bad", Bare, xp, from_host=None, to_host=None, gamma=None)
    finally:
        backend._DEVICES.pop("bare")
        backend._BY_TYPE.pop(Bare)


def test_module_to_moves_parameters_and_gradients():
    model = tt.nn.Linear(3, 2, rng=0)
    model(np.ones((1, 3), np.float32)).sum().backward()
    assert model.to(NAME) is model
    assert model.weight.device == NAME and model.bias.grad is not None
    assert isinstance(model.bias.grad, ForeignArray)
    assert model.weight.is_leaf if hasattr(model.weight, "is_leaf") else model.weight._prim is None
    model.to("cpu")
    assert type(model.weight.data) is np.ndarray and type(model.weight.grad) is np.ndarray


def test_minibatches_of_device_arrays():
    X, y = on(np.arange(20.0).reshape(10, 2)), on(np.arange(10))
    seen = []
    for xb, yb in tt.data.minibatches(X, y, 4, rng=0):
        assert isinstance(xb, ForeignArray) and isinstance(yb, ForeignArray)
        seen.extend(yb.get().tolist())
    assert sorted(seen) == list(range(10))
    xb, yb = next(iter(tt.data.minibatches(np.ones((4, 2)), np.zeros(4), 2, shuffle=False, device=NAME)))
    assert isinstance(xb, ForeignArray) and isinstance(yb, ForeignArray)


def test_the_digits_example_runs_on_another_device(tmp_path, monkeypatch, capsys):
    """examples/train_mlp.py --device: the same run, the same test accuracy (shortened)."""
    import importlib.util
    import pathlib

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")     # the script sets these; monkeypatch restores them after
    path = pathlib.Path(__file__).parents[2] / "examples" / "train_mlp.py"
    spec = importlib.util.spec_from_file_location("train_mlp", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    run = lambda device: script.main(["--epochs", "2", "--quiet", "--plot", str(tmp_path / "c.png"),
                                      "--device", device])
    assert run(NAME) == run("cpu") > 0.85
    assert f"hidden [256, 128], {NAME})" in capsys.readouterr().out


def test_the_cnn_example_runs_on_another_device(tmp_path, monkeypatch, capsys):
    """examples/train_cnn.py --device: the same run (checkpoint and resume included), the same
    test accuracy (two short epochs)."""
    import importlib.util
    import pathlib

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")
    path = pathlib.Path(__file__).parents[2] / "examples" / "train_cnn.py"
    spec = importlib.util.spec_from_file_location("train_cnn", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    quick = ["--total-epochs", "2", "--batch-size", "128", "--quiet", "--plot", str(tmp_path / "c.png")]
    run = lambda device, *more: script.main(quick + ["--device", device, "--checkpoint",
                                                     str(tmp_path / f"{device}.npz"), *more])
    cpu = run("cpu")
    assert run(NAME, "--epochs", "1") >= 0 and run(NAME, "--resume") == pytest.approx(cpu, abs=0.01)
    assert "resumed from" in capsys.readouterr().out


@pytest.mark.parametrize("device", ["cpu", NAME])
def test_the_readme_gpu_example_runs(device, capsys):
    code = readme_gpu_example()
    assert 'device = "cuda"' in code
    exec(code.replace('device = "cuda"', f"device = {device!r}"), {})
    assert capsys.readouterr().out.split()[-1] == device


def test_the_device_paths_of_scipy_only_calls_are_as_accurate():
    """sigmoid, xlogy (cross_entropy on probabilities) and frobenius_norm off NumPy: the portable
    formulas in backend.py against SciPy and BLAS, at the extremes."""
    x = np.array([-800.0, -40.0, -1e-8, 0.0, 3.0, 40.0, 800.0])
    got = tt.sigmoid(tt.tensor(x, device=NAME)).data.get()
    np.testing.assert_allclose(got, tt.sigmoid(tt.tensor(x)).data, rtol=1e-15, atol=0)
    assert got.dtype == np.float64
    assert tt.sigmoid(tt.tensor(x, device=NAME, dtype=np.float32)).dtype == np.float32
    y, p = np.array([0.0, 0.0, 0.5, 1.0]), np.array([0.0, 1.0, 0.25, 1e-300])
    np.testing.assert_array_equal(backend.xlogy(on(y), on(p)).get(), backend.xlogy(y, p))
    for w in (np.array([1e200, -1e200, 3e199]), np.array([1e-200, 2e-200]), np.zeros(3), np.zeros(0)):
        for dtype in (np.float64, np.float32):
            if dtype == np.float32 and np.abs(w).max(initial=0) > 1e30:
                continue
            v = w.astype(dtype)
            dev = tt.frobenius_norm(tt.tensor(v, device=NAME))
            np.testing.assert_allclose(dev.data.get(), tt.frobenius_norm(tt.tensor(v)).data, rtol=1e-6)
            assert dev.dtype == dtype


def test_a_training_step_never_waits_for_the_device(monkeypatch):
    """No value comes back to the host in an MLP's forward, cross-entropy (ignored labels too),
    backward and SGD-momentum step on a device: each such read (bool, float, int, item, tolist)
    stalls a GPU's queue (cross_entropy's ignore_index test did: 0.9 ms of a 3.7 ms step on an
    H200 at B=1024, H=4096)."""
    reads = []
    for name in ("__bool__", "__float__", "__int__", "__index__", "item", "tolist"):
        original = getattr(ForeignArray, name)
        monkeypatch.setattr(ForeignArray, name,
                            lambda self, *a, _o=original, _n=name: reads.append(_n) or _o(self, *a))
    model = tt.nn.Sequential(tt.nn.Linear(8, 16, rng=0), tt.nn.ReLU(), tt.nn.Linear(16, 4, rng=1)).to(NAME)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = on(np.random.default_rng(0).standard_normal((5, 8)))
    for labels, reduction in (([0, 1, 2, 3, 1], "mean"), ([0, -100, 2, 3, -100], "mean"),
                              ([0, 1, -100, 3, 1], "sum"), ([0, 1, 2, 3, 1], "none")):
        y = on(np.array(labels))
        opt.zero_grad()
        loss = tt.nn.CrossEntropyLoss(reduction=reduction)(model(x), y)
        loss.sum().backward()
        opt.step()
    assert reads == []
    # the ignored rows weigh nothing, as on the CPU
    logits, labels = np.eye(4) * 3.0, np.array([0, -100, 2, -100])
    cpu = tt.nn.CrossEntropyLoss()(tt.tensor(logits), labels)
    dev = tt.nn.CrossEntropyLoss()(tt.tensor(on(logits)), on(labels))
    np.testing.assert_allclose(backend.to_host(dev.data), cpu.data, rtol=1e-15)
