"""Issue 29's compile-vs-eager matrix: each case equal to eager, or refused naming a fix.

The cases are in matrix_cases.py, the harness (run eagerly and compiled, compare every output,
parameter, gradient, buffer, optimizer and generator state bit for bit) in matrix_harness.py;
``python tests/compile/matrix_table.py`` prints the table.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from matrix_cases import CASES  # noqa: E402
from matrix_harness import classify  # noqa: E402


def test_enough_cases():
    assert len(CASES) >= 170
    assert len({c.name for c in CASES}) == len(CASES)
    assert {c.k for c in CASES} >= {3, 10, 40}


@pytest.mark.parametrize("case", CASES, ids=[f"c{c.cls}-{c.name}" for c in CASES])
def test_compile_matches_eager_or_refuses(case):
    r = classify(case)
    assert r.outcome in ("equal", "refused"), f"{r.outcome}: {r.detail}"
