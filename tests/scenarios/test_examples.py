"""The examples of issue 12, run end to end with quick settings: examples/train_cnn.py (progress,
plot, checkpoint, a resume that is bit-identical to an uninterrupted run, --help) and
examples/binary_classification.py."""

import importlib.util
import pathlib

import numpy as np
import pytest

import tinytensor as tt

EXAMPLES = pathlib.Path(__file__).parents[2] / "examples"


@pytest.fixture(autouse=True)
def one_blas_thread():
    """The scripts pin BLAS to one thread before NumPy loads; here NumPy is already loaded, so
    pin it at run time (threads on small matrices only contend, several times slower)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(1):
        yield


def load_script(name, monkeypatch):
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")     # the scripts set these; monkeypatch restores them after
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_train_cnn_runs_checkpoints_and_resumes_bit_identically(tmp_path, monkeypatch, capsys):
    script = load_script("train_cnn", monkeypatch)
    quick = ["--total-epochs", "2", "--batch-size", "64", "--quiet"]
    straight = tmp_path / "straight.npz"
    accuracy = script.main(quick + ["--checkpoint", str(straight), "--plot", str(tmp_path / "a.png")])
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == f"test accuracy: {accuracy:.4f}" and accuracy > 0.3   # 2 short epochs: it learns
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    resumed = tmp_path / "resumed.npz"
    script.main(quick + ["--epochs", "1", "--checkpoint", str(resumed), "--plot", str(tmp_path / "b.png")])
    assert tt.load(resumed)["epoch"] == 1
    again = script.main(quick + ["--resume", "--checkpoint", str(resumed), "--plot", str(tmp_path / "b.png")])
    assert "resumed from" in capsys.readouterr().out
    a, b = tt.load(straight), tt.load(resumed)
    assert b["epoch"] == 2 and again == accuracy
    for name, value in a["model"].items():
        np.testing.assert_array_equal(b["model"][name], value, err_msg=name)
    assert a["history"] == b["history"]


def test_train_cnn_help(monkeypatch, capsys):
    script = load_script("train_cnn", monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        script.parse_args(["--help"])
    assert exit_info.value.code == 0
    assert "--resume" in capsys.readouterr().out


def test_random_shifts_move_each_image_within_range(monkeypatch):
    script = load_script("train_cnn", monkeypatch)
    x = np.zeros((50, 1, 8, 8), np.float32)
    x[:, 0, 3, 4] = 1
    moved = script.random_shifts(x, 1, np.random.default_rng(0))
    assert moved.shape == x.shape and moved.dtype == np.float32
    n, _, rows, cols = np.nonzero(moved)
    np.testing.assert_array_equal(n, np.arange(50))                  # one pixel per image, kept
    assert set(rows) == {2, 3, 4} and set(cols) == {3, 4, 5}


def test_binary_classification_example(monkeypatch, capsys):
    script = load_script("binary_classification", monkeypatch)
    accuracy = script.main(["--epochs", "15", "--quiet"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"test accuracy: {accuracy:.4f}"
    assert accuracy > 0.9
    accuracy = script.main(["--epochs", "200", "--patience", "2", "--quiet", "--lr", "0.05"])
    assert "stopped after epoch" in capsys.readouterr().out     # early stopping ends it well before 200
