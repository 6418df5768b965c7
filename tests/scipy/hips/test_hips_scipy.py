"""HIPS autograd's SciPy tests on tinytensor (the port: hips_scipy_cases.py; the check:
hips_check.py; the names: hips_shim.py). Each of autograd's 93 tests is one case here, run in
autograd's modes and again in both modes at every order (strict). The cases tinytensor does
not pass are expected failures with their reasons (NOT_SUPPORTED, STRICT_FAILS), so a fix shows
up as an unexpected pass and a regression as a failure. Full table: benchmarks/hips_autograd.py."""

import warnings

import pytest
from hips_scipy_cases import CASES, NOT_SUPPORTED, STRICT_FAILS, run


def _params(expected_failures):
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=expected_failures[name]))
            if name in expected_failures else name for name in CASES]


@pytest.mark.parametrize("name", _params(NOT_SUPPORTED))
def test_autograd_scipy_case(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # SciPy's own (ODE solver, overflow in tails)
        run(name)


@pytest.mark.parametrize("name", _params({**NOT_SUPPORTED, **STRICT_FAILS}))
def test_autograd_scipy_case_in_both_modes(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        run(name, strict=True)


def test_the_target_holds():
    """Issue 30's target: at least 85 of autograd's SciPy tests pass (here 90 of 93)."""
    assert len(CASES) == 93 and len(CASES) - len(NOT_SUPPORTED) >= 85
