"""Weight gradients come out row-major (C-contiguous), like the weights: an in-place optimizer
update on a Fortran-ordered gradient walks the weight's memory across the grain (5-7x slower;
benchmarks/bench_grad_layout.py measures it). Values are checked against NumPy's products."""

import numpy as np
import pytest

import tinytensor as tt


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch", [(), (5,), (2, 3)])
def test_linear_weight_gradient_is_row_major(bias, batch):
    rng = np.random.default_rng(0)
    layer = tt.nn.Linear(4, 3, bias=bias, rng=rng, dtype=np.float64)
    x = rng.standard_normal(batch + (4,))
    g = rng.standard_normal(batch + (3,))
    layer(x).backward(g)
    grad = layer.weight.grad
    assert grad.flags.c_contiguous and grad.shape == (3, 4)
    assert np.allclose(grad, g.reshape(-1, 3).T @ x.reshape(-1, 4), rtol=1e-13, atol=1e-13)


def test_transposed_weight_in_a_product_gives_a_row_major_gradient():
    """x @ W.T (the bias-free path, attention's projections): the gradient reaches W through a
    transposed view; the leaf's copy is row-major."""
    rng = np.random.default_rng(1)
    W = tt.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    x = rng.standard_normal((5, 4))
    (tt.tensor(x) @ W.T).sum().backward()
    assert W.grad.flags.c_contiguous
    assert np.allclose(W.grad, np.ones((5, 3)).T @ x)


def test_mlp_gradients_and_optimizer_state_are_row_major():
    rng = np.random.default_rng(2)
    model = tt.nn.Sequential(tt.nn.Linear(8, 16, rng=rng), tt.nn.ReLU(), tt.nn.Linear(16, 4, rng=rng))
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    tt.nn.CrossEntropyLoss()(model(rng.standard_normal((6, 8))), np.arange(6) % 4).backward()
    opt.step()
    assert all(p.grad.flags.c_contiguous and p.data.flags.c_contiguous for p in model.parameters())
