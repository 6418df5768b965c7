"""The fuzzer's compiled-replay check (every kind, NOT_YET_COMPILED gone) can fail: a value
tt.compile froze is a failure; a refusal at trace time that names what cannot be replayed is
not (it is what tt.compile must do there)."""

import pathlib
import sys

import numpy as np

from tinytensor.compile.tracer import _Tracer

sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
import fuzz  # noqa: E402

PROGRAM = dict(inputs=[dict(shape=[3], view="c"), dict(shape=[3], view="c")],
               steps=[dict(kind="floor", args=[["in", 0]], params={}),
                      dict(kind="where", args=[["step", 0], ["in", 1]], params={})])


def test_floor_and_where_programs_replay():
    assert fuzz.run_one(PROGRAM, 3, True)[1] is None


def test_a_frozen_value_is_a_failure(monkeypatch):
    # the recorder forgets values computed off the tape (floor) and comparison masks: the
    # compiled program keeps the trace's, a silent difference the fuzzer must report
    monkeypatch.setattr(_Tracer, "numpy", lambda self, *args, **kwargs: None)
    monkeypatch.setattr(_Tracer, "compared", lambda self, op, t, other, value: value)
    failure = fuzz.run_one(PROGRAM, 3, False)[1]
    assert failure is not None and failure.startswith("compiled:")


def test_a_named_refusal_at_trace_time_is_not_a_failure(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise RuntimeError("tt.compile: floor cannot be replayed (a test's refusal)")

    monkeypatch.setattr(_Tracer, "numpy", refuse)
    stats = {}
    assert fuzz.check(PROGRAM, np.random.default_rng(3), stats=stats) > 0
    assert stats["compile_refused"] == 1


def test_another_error_while_recording_is_a_failure(monkeypatch):
    def broken(self, *args, **kwargs):
        raise RuntimeError("something else")

    monkeypatch.setattr(_Tracer, "numpy", broken)
    failure = fuzz.run_one(PROGRAM, 3, False)[1]
    assert failure is not None and "something else" in failure
