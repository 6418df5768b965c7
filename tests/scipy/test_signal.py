"""tt.scipy.signal.convolve with HIPS autograd's axes=/dot_axes= (its autograd.scipy.signal.convolve):
convolve along `axes`, contract along `dot_axes`, the outer product over the rest."""

import numpy as np
import pytest
import scipy.signal

import tinytensor as tt
from tinytensor.scipy import signal as tsig

RNG = np.random.default_rng(0)


def _values(x):
    return x.data if isinstance(x, tt.Tensor) else x


@pytest.mark.parametrize("mode", ["valid", "full", "same"])
def test_axes_and_dot_axes_match_scipy_on_slices(mode):
    A35, A34, A342 = RNG.standard_normal((3, 5)), RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4, 2))
    A2543, A24232 = RNG.standard_normal((2, 5, 4, 3)), RNG.standard_normal((2, 4, 2, 3, 2))
    ref = scipy.signal.convolve
    out = _values(tsig.convolve(A35, A34, axes=([1], [0]), mode=mode))
    assert out.shape[:2] == (3, 4)
    np.testing.assert_allclose(out[1, 2], ref(A35[1, :], A34[:, 2], mode), rtol=1e-12)
    dotted = tsig.convolve(A35, A34, axes=([], []), dot_axes=([0], [0]), mode=mode)
    np.testing.assert_allclose(_values(dotted), np.tensordot(A35, A34, ([0], [0])), rtol=1e-12)
    np.testing.assert_allclose(
        _values(tsig.convolve(A35, A342, axes=([1], [2]), dot_axes=([0], [0]), mode=mode))[2],
        sum(ref(A35[i, :], A342[i, 2, :], mode) for i in range(3)), rtol=1e-12)
    np.testing.assert_allclose(
        _values(tsig.convolve(A2543, A24232, axes=([1, 2], [2, 4]), dot_axes=([0, 3], [0, 3]), mode=mode))[2],
        sum(ref(A2543[i, :, :, j], A24232[i, 2, :, j, :], mode) for i in range(2) for j in range(3)),
        rtol=1e-12)


def test_axes_default_is_scipys_convolve():
    a, b = RNG.standard_normal((4, 3)), RNG.standard_normal((2, 2))
    np.testing.assert_allclose(_values(tsig.convolve(a, b, mode="same")), scipy.signal.convolve(a, b, "same"),
                               rtol=1e-12)
    np.testing.assert_allclose(_values(tsig.convolve(a, b, axes=([0, 1], [0, 1]), mode="valid")),
                               scipy.signal.convolve(a, b, "valid"), rtol=1e-12)


@pytest.mark.parametrize("axes, dot_axes", [(([0], [1]), ([], [])), (([1], [1]), ([0], [2]))])
def test_axes_gradients_both_modes(axes, dot_axes):
    a, b = RNG.standard_normal((3, 3, 2))[..., 0], RNG.standard_normal((3, 2, 3))[:, :, 0]
    if dot_axes[1]:
        a, b = RNG.standard_normal((3, 3, 2)), RNG.standard_normal((3, 2, 3))
    for mode in ("full", "valid", "same"):
        tt.gradcheck(lambda x, y: tsig.convolve(x, y, axes=axes, dot_axes=dot_axes, mode=mode), a, b)


def test_mismatched_axes_are_refused():
    with pytest.raises(ValueError, match="convolve"):
        tsig.convolve(np.ones((3, 4)), np.ones((4, 3)), axes=([0], [0]), dot_axes=([1], [1]))
    with pytest.raises(ValueError, match="convolve"):
        tsig.convolve(np.ones((3, 4)), np.ones((4, 3)), axes=([0], [0, 1]))
