"""examples/gaussian_process.py: the fit converges, and its loss is SciPy's own."""

import pathlib
import runpy
import sys

import numpy as np
import scipy.stats

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "gaussian_process.py"


def test_the_example_fits_and_its_loss_is_scipys(capsys, monkeypatch):
    module = runpy.run_path(str(EXAMPLE))
    x = np.linspace(-2, 2, 7)
    y = np.sin(x)
    theta = np.array([0.1, -0.2, -1.0])
    cov = module["kernel"](x, x, *theta[:2]) + (np.exp(2 * theta[2]) + 1e-8) * np.eye(7)
    expected = -(scipy.stats.multivariate_normal.logpdf(y, np.zeros(7), cov)
                 + scipy.stats.norm.logpdf(theta, 0, 2).sum())
    np.testing.assert_allclose(module["make_loss"](x, y)(theta).item(), expected, rtol=1e-12)
    monkeypatch.setattr(sys, "argv", ["gaussian_process.py", "--points", "15", "--out", ""])
    module["main"]()
    out = capsys.readouterr().out
    assert "L-BFGS-B" in out and "noise sd" in out
