"""The project's own fuzzer (tests/fuzz.py) in the suite: a few hundred random programs with a
fixed seed, each checked in both modes, against central differences, in float32, compiled and at
second order. `python -m tests.fuzz --programs 10000` runs more."""

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
import fuzz  # noqa: E402


def test_every_kind_names_a_spec_row():
    fuzz._check_spec_rows()


def test_fixed_seed_programs_pass_every_check():
    programs, checks, failures, messages = fuzz.fuzz(200, seed=0)   # (the fuzzer's own runs go to
    assert programs >= 185 and checks > 7 * programs                  # 20,000: tests/checks/fuzz.py)
    assert failures == 0, "\n\n".join(f"{fuzz.describe(p)}\n  {m}" for p, m in messages[:3])


def test_a_broken_rule_is_caught_shrunk_and_stored(tmp_path):
    # the checks can fail: relu's VJP scaled by 1.001 breaks the adjoint identity; the failing
    # program is shrunk to the steps that matter and stored as a replayable JSON file
    import json

    from tinytensor import ops
    program = dict(inputs=[dict(shape=[3], view="c"), dict(shape=[2], view="T")],
                   steps=[dict(kind="relu", args=[["in", 0]], params={}),
                          dict(kind="exp", args=[["in", 1]], params={}),
                          dict(kind="sin", args=[["step", 0]], params={})])
    assert fuzz.run_one(program, 0, False)[1] is None
    rules = ops.relu.vjps
    ops.relu.vjps = (lambda g, ans, x: rules[0](g, ans, x) * 1.001,)
    try:
        failure = fuzz.run_one(program, 0, False)[1]
        small = fuzz.shrink(program, 0, False)
    finally:
        ops.relu.vjps = rules
    assert failure is not None and "adjoint" in failure
    assert [s["kind"] for s in small["steps"]] == ["relu"] and len(small["inputs"]) == 1
    fuzz._store(str(tmp_path), 0, 0, small, failure, False)
    entry = json.loads((tmp_path / "seed0.json").read_text())
    assert entry["program"] == small and "relu" in entry["readable"]


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=20, derandomize=True, deadline=None)
@given(st.integers(0, 2 ** 63 - 1))
def test_programs_drawn_by_hypothesis(seed):
    program = fuzz.generate(np.random.default_rng(seed))
    if program["steps"]:
        _, failure = fuzz.run_one(program, seed, hvp=seed % 3 == 0)
        assert failure is None, f"{fuzz.describe(program)}\n  {failure}"
