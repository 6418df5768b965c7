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
from matrix_harness import classify, first_difference, run  # noqa: E402


def test_enough_cases():
    assert len(CASES) >= 170
    assert len({c.name for c in CASES}) == len(CASES)
    assert {c.k for c in CASES} >= {3, 10, 40}


RESULTS = {}     # case name -> its classification, shared with the table's test


def _classified(case):
    if case.name not in RESULTS:
        RESULTS[case.name] = classify(case)
    return RESULTS[case.name]


@pytest.mark.parametrize("case", CASES, ids=[f"c{c.cls}-{c.name}" for c in CASES])
def test_compile_matches_eager_or_refuses(case):
    r = _classified(case)
    assert r.outcome in ("equal", "refused"), f"{r.outcome}: {r.detail}"


def test_the_guide_shows_the_current_table():
    """docs/guides/compile.md's matrix table is the one these cases give today (regenerate it
    with python tests/compile/matrix_table.py --write docs/guides/compile.md)."""
    import matrix_table
    page = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "guides", "compile.md")
    want = matrix_table.summary([_classified(c) for c in CASES])
    assert matrix_table.current(page) == want


def test_eager_runs_are_reproducible():
    """The harness's own check: two eager runs of every case are bit for bit the same."""
    for case in CASES:
        a, err, _, _ = run(case, compiled=False)
        b, _, _, _ = run(case, compiled=False)
        assert err is None, f"{case.name}: eager raised {err!r}"
        assert first_difference(a, b) is None and len(a) == len(b) == case.n, case.name


# Issue 29: a number argument is an input of the program (tinytensor/compile/tracer.py, _Number)
CHURN = [c for c in CASES if c.max_traces is not None]


@pytest.mark.parametrize("case", CHURN, ids=[f"c{c.values[0].cls}-{c.values[0].name}" if hasattr(c, "values")
                                             else f"c{c.cls}-{c.name}" for c in CHURN])
def test_changing_float_is_an_input_not_a_cache_key(case):
    """Issue 29: a learning rate passed as a number every call must not re-record every call."""
    r = _classified(case)
    assert r.outcome in ("equal", "refused"), f"{r.outcome}: {r.detail}"
    if r.outcome == "equal":
        assert r.traces is not None and r.traces <= case.max_traces, (
            f"{r.traces} recordings in {case.n} calls (at most {case.max_traces})")
