"""ops/softmax_xent.py: one label-range check with one message, and the logits of a softmax seen
by cross_entropy off the tape too."""
import numpy as np
import pytest
import scipy.special

import tinytensor as tt
from tinytensor import nn
from tinytensor.ops import softmax_xent


@pytest.mark.parametrize("call", [
    pytest.param(lambda z, y: tt.cross_entropy(tt.softmax(z), y), id="cross_entropy"),
    pytest.param(lambda z, y: tt.softmax_cross_entropy(z, y), id="softmax_cross_entropy"),
    pytest.param(lambda z, y: tt.compile(lambda z, y: tt.crossEntropy(tt.softmax(z), y).sum())(z, y),
                 id="compile"),
    pytest.param(lambda z, y: nn.CrossEntropyLoss(label_smoothing=0.1)(z, y), id="CrossEntropyLoss"),
    pytest.param(lambda z, y: nn.NLLLoss()(tt.log_softmax(z), y), id="NLLLoss"),
])
def test_one_message_for_class_indices_out_of_range(call):
    z = tt.tensor(np.zeros((2, 3)), requires_grad=True)
    with pytest.raises(IndexError) as caught:
        call(z, np.array([0, 3]))
    message = str(caught.value)      # (eagerly, the op's name and inputs are around it)
    assert "class indices must lie in [0, 3)" in message and "; got 0..3" in message


def test_the_range_check_allows_ignore_index_and_names_it():
    softmax_xent.check_class_range(np.array([0, 2, -100]), 3, "CrossEntropyLoss", ignore_index=-100)
    with pytest.raises(IndexError, match=r"^CrossEntropyLoss: class indices must lie in \[0, 3\) "
                                         r"\(or equal ignore_index=-100\); got -1\.\.2$"):
        softmax_xent.check_class_range(np.array([0, 2, -1]), 3, "CrossEntropyLoss", ignore_index=-100)
    softmax_xent.check_class_range(np.zeros(0, np.int64), 3)   # no labels: nothing to check


def test_cross_entropy_of_a_softmax_under_no_grad_uses_the_logits():
    """Off the tape the softmax output remembers its logits (the module's map), so an evaluation
    loop's loss stays finite where log(softmax) underflows to -inf."""
    z = tt.tensor(np.array([[1000.0, 0.0, -1000.0]]))
    with tt.no_grad():
        p = tt.softmax(z)
        assert p.numpy()[0, 2] == 0.0
        loss = tt.cross_entropy(p, np.array([2]))
    assert loss.item() == pytest.approx(2000.0)
    unfused = tt.cross_entropy(tt.tensor(p.numpy()), np.array([2]))   # a copy: no logits known
    assert np.isinf(unfused.item())


def test_a_softmax_output_made_a_leaf_gets_its_own_gradient():
    z = tt.tensor(np.array([[0.5, -0.2, 0.1]]))
    p = tt.softmax(z).requires_grad_(True)          # off the tape, then a leaf: its gradient is wanted
    tt.cross_entropy(p, np.array([1])).backward()
    expected = np.zeros((1, 3))
    expected[0, 1] = -1 / p.numpy()[0, 1]
    np.testing.assert_allclose(p.grad, expected, rtol=1e-12)


def test_wengert_list_hides_the_logits_input_of_cross_entropy():
    z = tt.tensor(np.array([[0.5, -0.2, 0.1]]), requires_grad=True)
    loss = tt.crossEntropy(tt.softmax(z), np.array([1]))
    assert len(loss._inputs) == 3                   # p, y and the hidden logits
    assert tt.wengert_list(loss) == [("z1", "softmax", ("x1",)), ("z2", "crossEntropy", ("z1", "c1"))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_softmax_on_many_short_rows_matches_scipy_and_compiles_to_the_same_numbers(dtype):
    """Attention-shaped softmax (many rows of 32, some entries -inf) takes its max from a
    transposed copy and its sums from BLAS (ops.softmax_xent.row_max/row_sum): the same values as
    SciPy to rounding, the same rules, and tt.compile's fused crossEntropy(softmax) computes them
    with the same helpers, so compiled equals eager bit for bit."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4, 32, 32)).astype(dtype) * 3
    x[..., np.triu_indices(32, 1)[0], np.triu_indices(32, 1)[1]] = -np.inf
    rtol = 1e-5 if dtype == np.float32 else 1e-13     # float32: exp(x - max) rounds x - max
    p = tt.softmax(x, axis=-1)
    np.testing.assert_allclose(p, scipy.special.softmax(x.astype(np.float64), axis=-1), rtol=rtol, atol=1e-30)
    np.testing.assert_allclose(tt.log_softmax(x[..., :1, :], axis=-1)[..., 0],
                               scipy.special.log_softmax(x[..., :1, :].astype(np.float64), axis=-1)[..., 0],
                               rtol=rtol)
    g = rng.standard_normal(x.shape).astype(dtype)
    (vjp,) = tt.vjp(lambda v: tt.softmax(v, axis=-1), x)[1](g)
    expected = p * (g - np.sum(g * p, axis=-1, keepdims=True))
    np.testing.assert_allclose(vjp, expected, rtol=rtol * 10, atol=rtol * 10)
    nan_row = x.copy()
    nan_row[0, 0, 5, 3] = np.nan
    q = tt.softmax(nan_row, axis=-1)
    assert np.isnan(q[0, 0, 5]).all() and not np.isnan(q[0, 0, 6]).any()
    z, y = rng.standard_normal((512, 65)).astype(dtype), rng.integers(0, 65, 512)
    f = tt.value_and_grad(lambda z: tt.cross_entropy(tt.softmax(z), y))
    (v1, g1), (v2, g2) = f(z), tt.compile(f)(z)
    assert v1 == v2 and np.array_equal(g1, g2)
    log_p = scipy.special.log_softmax(z.astype(np.float64), axis=-1)
    np.testing.assert_allclose(v1, -log_p[np.arange(512), y].mean(), rtol=rtol * 10)
