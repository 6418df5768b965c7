"""check_rules(only=...): the rows asked for, and nothing else."""
import numpy as np
import pytest

import tinytensor as tt


def test_only_checks_the_rows_named(registry):
    square = tt.primitive(lambda x: x * x, name="user_only_square")
    square.defvjp(lambda g, ans, x: 2 * x * g)
    square.defjvp(lambda t, ans, x: 2 * x * t)
    rows = tt.check_rules(verbose=False, only=square)
    assert [r["op"] for r in rows] == ["user_only_square"] and rows[0]["ok"]
    rows = tt.check_rules(verbose=False, only=["tanh", "user_only_square", tt.ops.mul])
    assert sorted(r["op"] for r in rows) == ["mul", "tanh", "user_only_square"]
    assert all(r["ok"] and r["cases"] > 0 for r in rows)
    broken = tt.primitive(lambda x: x * x, name="user_only_broken")
    broken.defvjp(lambda g, ans, x: 2.1 * x * g)
    broken.defjvp(lambda t, ans, x: 2 * x * t)
    assert tt.check_rules(verbose=False, only="user_only_square")       # the broken row is not swept
    with pytest.raises(tt.GradcheckError, match="user_only_broken"):
        tt.check_rules(verbose=False, only=broken, examples={broken: [(np.array([0.5, 1.5]),)]})


def test_only_with_an_unknown_name_raises():
    with pytest.raises(ValueError, match=r"only= names no registered primitive \['no_such_op'\]"):
        tt.check_rules(only=["tanh", "no_such_op"])
