"""Scenarios PyTorch/micrograd users and students run on the tape, the pictures and the scalar
engine (QA): each test is a wrong number, a crash or an unclear error that was found and fixed;
it fails on the code before its fix."""


import pytest

import tinytensor as tt


# ----- evaluation_trace ---------------------------------------------------------------------------
def test_evaluation_trace_wrt_an_input_the_output_does_not_use_says_so(capsys):
    x1 = tt.tensor(2.0, requires_grad=True, name="x1")
    other = tt.tensor(5.0, requires_grad=True, name="other")
    y = x1 * x1
    with pytest.raises(ValueError, match=r"evaluation_trace: wrt=other .* not an input of"):
        tt.evaluation_trace(y, wrt=other)     # was a bare KeyError with an id number
