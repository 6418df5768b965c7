"""NumPy's scientific functions on Tensors (recorded, both modes), and array-like operands of
recorded ops converted when the entry is made."""

import numpy as np
import pytest

import tinytensor as tt


def test_list_operands_are_converted_when_the_entry_is_made():
    t = tt.tensor([3.0, 4.0], requires_grad=True)
    y = np.dot([1.0, 2.0], t)                        # was: 'list' object has no attribute 'ndim'
    y.backward()
    np.testing.assert_array_equal(t.grad, [1.0, 2.0])
    assert all(not isinstance(a, list) for a in y._inputs)
    second = tt.grad(lambda t: tt.sum(tt.grad(lambda t: np.dot([1.0, 2.0], t * t))(t)))
    np.testing.assert_array_equal(second(np.array([3.0, 4.0])), [2.0, 4.0])
    z = tt.mul((2.0, 1.0), t)
    assert type(z._inputs[0]) is np.ndarray
    tt.sum(z).backward()


@pytest.mark.parametrize("call", [lambda t: tt.matmul(((1.0, 0.0), (0.0, 2.0)), t),
                                  lambda t: tt.linalg.solve([[2.0, 0.0], [0.0, 4.0]], t)])
def test_tuples_and_nested_lists_in_both_modes(call):
    tt.gradcheck(call, np.array([1.0, -2.0]))
