"""A NumPy scalar does not widen a float32 Tensor (issue 23 item 7): `att * (1 / np.sqrt(hs))`
stays float32, as in PyTorch (and NumPy 1); arrays keep NumPy's promotion."""

import numpy as np
import pytest

import tinytensor as tt


@pytest.mark.parametrize("scalar", [np.float64(0.125), np.int64(3), np.float32(2.0), np.bool_(True)])
def test_numpy_scalars_are_weak_in_every_operator(scalar):
    t = tt.tensor(np.linspace(1, 2, 4, dtype=np.float32), requires_grad=True)
    results = [t + scalar, scalar + t, t - scalar, scalar - t, t * scalar, scalar * t, t / scalar,
               scalar / t, t ** scalar, np.multiply(t, scalar), np.add(scalar, t)]
    assert all(r.dtype == np.float32 for r in results), [r.dtype for r in results]
    np.testing.assert_allclose((t * scalar).data, t.data * float(scalar), rtol=1e-7)
    sum(tt.sum(r) for r in results).backward()
    assert t.grad.dtype == np.float32


def test_the_attention_scale_keeps_float32_and_arrays_still_promote():
    hs = 16
    att = tt.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    assert (att * (1 / np.sqrt(hs))).dtype == np.float32                    # np.float64 scalar
    assert (att * np.ones((2, 3))).dtype == np.float64                      # an array: NumPy's rule
    assert (att * np.float64(0.5)).data.tolist() == (att * 0.5).data.tolist()
    assert (tt.tensor(np.ones(2)) * np.float32(0.5)).dtype == np.float64    # never narrows
    assert (tt.tensor(np.arange(3)) * np.float64(0.5)).dtype == np.float64  # ints: as a Python float
