"""examples/dp_sgd.py (issue 33): DP-SGD with tt.vmap's per-example gradients, quick settings."""

import importlib.util
import pathlib

import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "dp_sgd.py"


@pytest.fixture
def script(monkeypatch):
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")
    spec = importlib.util.spec_from_file_location("dp_sgd", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dp_sgd_learns_and_prints_both_accuracies(script, capsys):
    private, plain = script.main(["--quick"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-2] == f"DP-SGD (C=1.0, sigma=1.0) test accuracy: {private:.4f}"
    assert lines[-1] == f"SGD test accuracy: {plain:.4f}"
    assert private > 0.4 and plain > 0.6          # 2 short epochs: both learn, noise costs accuracy


def test_without_clipping_or_noise_the_private_gradient_is_the_batch_gradient(script):
    rng = np.random.default_rng(0)
    params = script.init_params([64, 16, 10], rng)
    x, y = rng.standard_normal((8, 64)), rng.integers(0, 10, 8)
    private = script.private_gradient(params, x, y, clip=1e12, noise=0.0, rng=rng)
    batch = script.batch_grad(params, x, y)
    for k in params:
        np.testing.assert_allclose(private[k], batch[k], rtol=1e-12, atol=1e-15)
    # clipped: every example's contribution has norm at most C
    g = script.per_example_grads(params, x, y)
    clipped = script.private_gradient(params, x, y, clip=1e-3, noise=0.0, rng=rng)
    assert np.sqrt(sum(np.sum(v ** 2) for v in clipped.values())) <= 1e-3 + 1e-12
    assert all(v.shape == (8,) + params[k].shape for k, v in g.items())
