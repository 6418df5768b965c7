"""The same code on a GPU: Tensors backed by CuPy arrays, compared with the CPU.

Skipped, with the reason shown by `pytest -rs`, where CuPy or a GPU is missing (CI has neither;
tests/devices/test_device_neutral.py covers the same code paths there with a stand-in library).
"""

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import backend

try:
    import cupy
except ImportError:
    pytest.skip("CuPy is not installed (pip install -e \".[gpu]\")", allow_module_level=True)
try:
    backend.get_device("cuda")
    cupy.zeros(1).sum().item()
except Exception as err:   # noqa: BLE001 - no GPU, no driver, a broken install: all mean skip
    pytest.skip(f"no usable GPU for CuPy: {err}", allow_module_level=True)

from device_sweep import (  # noqa: E402
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

CUDA = "cuda"


def on_gpu(x, dtype=None):
    return cupy.asarray(np.asarray(x, dtype=dtype))


# tt.scipy's rows whose forward is SciPy's (host-only in tests/device_sweep.py) but which CuPy runs
# all the same: CuPy's __array_ufunc__ hands scipy.special's ufuncs to cupyx.scipy.special. Seen
# on an H200 with CuPy 14.2.0; a CuPy without the function keeps the row host-only (expected to fail).
CUPY_RUNS_SCIPY = {name for name in (
    "beta", "betaln", "entr", "erfc", "erfcinv", "erfinv", "gamma", "gammaln", "i0", "i0e", "j0",
    "log_ndtr", "logit", "ndtr", "ndtri", "rgamma", "xlog1py", "xlogy", "y0", "y1")
    if hasattr(importlib.import_module("cupyx.scipy.special"), name)}


@pytest.mark.parametrize("name, index, dtype", sweep_params(runs_anyway=CUPY_RUNS_SCIPY))
def test_op_rows_on_the_gpu(name, index, dtype):
    check_case(name, index, CUDA, dtype)


def test_the_lecture_loss_on_the_gpu():
    """crossEntropy(softmax(x W), y) + frobeniusNorm(W): value, gradient, tangent, gradcheck."""
    rng = np.random.default_rng(0)
    x, W = rng.standard_normal((8, 5)), rng.standard_normal((5, 3))
    y = np.eye(3)[rng.integers(0, 3, 8)]
    dW = rng.standard_normal((5, 3))

    def run(device):
        Wt = tt.tensor(W, requires_grad=True, device=device)
        loss = tt.crossEntropy(tt.softmax(tt.dot(tt.tensor(x, device=device), Wt)),
                               tt.tensor(y, device=device)) + tt.frobeniusNorm(Wt)
        tangent = loss.jvp({Wt: backend.to_device(dW, device)})
        loss.backward()
        return loss, Wt.grad, tangent

    (loss, grad, tangent), (ref, ref_grad, ref_tangent) = run(CUDA), run("cpu")
    assert loss.device == CUDA and isinstance(grad, cupy.ndarray) and isinstance(tangent, cupy.ndarray)
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-12)
    np.testing.assert_allclose(grad.get(), ref_grad, rtol=1e-10)
    np.testing.assert_allclose(tangent.get(), ref_tangent, rtol=1e-10)
    f = lambda x, W: tt.crossEntropy(tt.softmax(tt.dot(x, W)), on_gpu(y)) + tt.frobeniusNorm(W)
    assert tt.gradcheck(f, on_gpu(x), on_gpu(W))


@pytest.mark.parametrize("bad", [3, -1, 10**6])
def test_out_of_range_labels_give_nan_on_the_gpu(bad):
    check_out_of_range_labels(CUDA, bad)


def test_transforms_on_the_gpu():
    check_transforms(CUDA)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_mlp_training_on_the_gpu_matches_the_cpu(optimizer):
    check_training(CUDA, optimizer)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_cnn_training_on_the_gpu_matches_the_cpu(optimizer):
    """Conv2d, pools, BatchNorm, Dropout, the losses' options, every optimizer and a schedule."""
    check_cnn(CUDA, optimizer, rtol=1e-4, atol=1e-5)


def test_more_layers_losses_and_clipping_on_the_gpu():
    check_more_layers_and_losses(CUDA)


def test_the_readme_gpu_example_runs_on_the_gpu(capsys):
    exec(readme_gpu_example(), {})
    assert capsys.readouterr().out.split()[-1] == CUDA


def test_tensor_api_on_the_gpu():
    x = tt.tensor([[1.0, 2.0]], requires_grad=True, device=CUDA)
    assert x.device == CUDA and isinstance(x.data, cupy.ndarray)
    assert tt.tensor(cupy.ones(3)).device == CUDA                    # a CuPy array stays on the GPU
    assert tt.zeros(2, device=CUDA).device == CUDA and tt.randn(2, rng=0, device=CUDA).device == CUDA
    assert x.cpu().device == "cpu" and x.to("cuda") is x and x.cuda() is x
    assert "device='cuda'" in repr(x)
    with pytest.raises(TypeError, match=r"cpu\(\)"):
        x.numpy()
    with pytest.raises(TypeError):
        np.asarray(x)
    with pytest.raises(TypeError, match=r"different devices \(cpu and cuda\)"):
        x + tt.tensor([[1.0, 2.0]])
    y = tt.tensor([1.0, 2.0], requires_grad=True)
    (y.cuda() ** 2).sum().backward()                               # the gradient comes back to the CPU
    np.testing.assert_allclose(y.grad, [2.0, 4.0])


@pytest.mark.slow
def test_the_digits_example_reaches_the_cpu_accuracy_on_the_gpu():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def accuracy(device):
        run = subprocess.run([sys.executable, "examples/train_mlp.py", "--quiet", "--plot", os.devnull,
                              "--device", device], capture_output=True, text=True, cwd=root,
                             env={**os.environ, "PYTHONPATH": root})
        assert run.returncode == 0, run.stderr[-2000:]
        return float(run.stdout.strip().splitlines()[-1].split()[-1])

    cpu, gpu = accuracy("cpu"), accuracy(CUDA)
    print(f"digits test accuracy: cpu {cpu:.4f}, cuda {gpu:.4f}")
    assert gpu >= cpu - 0.01 and gpu > 0.95


# ----- NCCL through CuPy on one GPU: the calls tt.distributed makes, on a one-rank communicator --

NCCL_DTYPES = (np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.uint32,
               np.int64, np.uint64, np.complex64, np.complex128)


@pytest.fixture
def one_rank_nccl(monkeypatch):
    """tt.distributed's NCCL communicator, made here for a world of one rank (two ranks need two
    GPUs: tests/distributed/test_distributed.py runs those where they exist)."""
    from cupy.cuda import nccl

    from tinytensor import distributed as dist
    try:
        comm = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
    except Exception as err:   # noqa: BLE001 - CuPy built without NCCL, or NCCL refusing the device
        pytest.skip(f"no NCCL communicator on this GPU: {err}")
    monkeypatch.setattr(dist._STATE, "nccl", comm)
    return dist


@pytest.mark.parametrize("dtype", NCCL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_nccl_collectives_on_one_rank(one_rank_nccl, dtype):
    dist = one_rank_nccl
    host = (np.arange(12).reshape(3, 4) % 7).astype(dtype)
    if np.dtype(dtype).kind == "c":
        host = host + 1j * host[::-1]
    a = cupy.asarray(host)
    for op in ("sum", "max", "min") if np.dtype(dtype).kind != "c" else ("sum",):
        out = dist._nccl_all_reduce(a, op)
        assert isinstance(out, cupy.ndarray) and out.dtype == a.dtype and out.shape == a.shape
        np.testing.assert_array_equal(cupy.asnumpy(out), host)
    np.testing.assert_array_equal(cupy.asnumpy(a), host)                  # the input is untouched
    flat = cupy.asarray(host).ravel()
    dist._nccl_all_reduce(flat, "sum", out=flat)                          # in place, as a bucket
    np.testing.assert_array_equal(cupy.asnumpy(flat), host.ravel())
    np.testing.assert_array_equal(cupy.asnumpy(dist._nccl_broadcast(a, 0)), host)
    gathered = dist._nccl_all_gather(a)
    assert gathered.shape == (1, 3, 4)
    np.testing.assert_array_equal(cupy.asnumpy(gathered[0]), host)
    cupy.cuda.get_current_stream().synchronize()


def test_nccl_refuses_what_it_cannot_carry(one_rank_nccl):
    dist = one_rank_nccl
    with pytest.raises(TypeError, match="max and min of complex"):
        dist._nccl_all_reduce(cupy.ones(3, dtype=np.complex128), "max")
    with pytest.raises(TypeError, match="NCCL has no datatype for bool"):
        dist._nccl_all_reduce(cupy.ones(3, dtype=bool), "sum")


def test_nccl_sums_a_non_contiguous_array(one_rank_nccl):
    a = cupy.arange(24.0).reshape(4, 6)[:, ::2]
    np.testing.assert_array_equal(cupy.asnumpy(one_rank_nccl._nccl_all_reduce(a, "sum")),
                                  cupy.asnumpy(a))
