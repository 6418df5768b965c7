"""The speed paths of the convolution and pooling primitives (nn/functional.py) give the numbers
of the plain formulas: the few-channel im2col, the input gradient batched over kernel offsets, the
long thin weight-gradient product in row blocks, the pools keeping a channels-last layout, and the
ReLU rule's finiteness check (ops/table.py _select). Float64, seeded, against loop references."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.nn import functional as F
from tinytensor.ops.table import _select


def _loop_im2col(x, kernel, stride, padding, dilation):
    """Rows (N * Ho * Wo, kh * kw * C) of every window, offsets outer and channels inner."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    ho = (h + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    rows = np.empty((n, ho, wo, kernel[0], kernel[1], c))
    for a in range(ho):
        for b in range(wo):
            for i in range(kernel[0]):
                for j in range(kernel[1]):
                    top, left = a * stride[0] + i * dilation[0], b * stride[1] + j * dilation[1]
                    rows[:, a, b, i, j] = xp[:, :, top, left]
    return rows.reshape(n * ho * wo, -1)


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("stride, padding, dilation", [((1, 1), (1, 1), (1, 1)), ((2, 1), (0, 2), (1, 2))])
def test_im2col_for_few_and_many_channels_equals_a_loop(channels, stride, padding, dilation):
    x = np.random.default_rng(channels).standard_normal((2, channels, 7, 6))
    cols, _ = F._im2col(x, (3, 2), stride, padding, dilation)
    np.testing.assert_array_equal(cols, _loop_im2col(x, (3, 2), stride, padding, dilation))


@pytest.mark.parametrize("stride, padding, dilation", [((1, 1), (1, 1), (1, 1)), ((2, 3), (2, 0), (2, 1))])
def test_conv2d_input_gradient_is_the_adjoint_of_the_forward(stride, padding, dilation):
    # the forward against the loop's windows, then <conv2d(x, w), g> = <x, conv2d_grad_input(g, w)>
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3, 3, 2))
    params = dict(stride=stride, padding=padding, dilation=dilation)
    x = rng.standard_normal((2, 3, 9, 8))
    y = F._conv2d_forward(x, w, None, **params)
    rows = _loop_im2col(x, w.shape[2:], stride, padding, dilation) @ w.transpose(0, 2, 3, 1).reshape(4, -1).T
    expected = rows.reshape(2, y.shape[2], y.shape[3], 4).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(y, expected, atol=1e-12)
    g = rng.standard_normal(y.shape)
    dx = F._conv2d_grad_input_forward(g, w, x.shape, **params)
    for _ in range(3):
        x = rng.standard_normal(x.shape)
        np.testing.assert_allclose(np.vdot(F._conv2d_forward(x, w, None, **params), g), np.vdot(x, dx),
                                   rtol=1e-12)


@pytest.mark.parametrize("batch", [64, 51])     # 51 * 81 = 4131 rows: 8 blocks and 3 rows left over
def test_conv2d_weight_gradient_of_many_rows_equals_the_single_product(batch):
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, 1, 9, 9))
    g = rng.standard_normal((batch, 16, 9, 9))
    dw = F._conv2d_grad_weight_forward(x, g, (3, 3), padding=(1, 1))
    rows = g.transpose(0, 2, 3, 1).reshape(-1, 16)
    expected = rows.T @ _loop_im2col(x, (3, 3), (1, 1), (1, 1), (1, 1))
    expected = expected.reshape(16, 3, 3, 1).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(dw, expected, rtol=1e-12, atol=1e-11)


def test_pools_keep_a_channels_last_layout_and_their_values():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5, 6, 4)).transpose(0, 3, 1, 2)          # NHWC memory
    plain = np.ascontiguousarray(x)
    for forward in (F._max_pool_forward, F._avg_pool_forward):
        out = forward(x, (2, 2), (2, 2))
        np.testing.assert_array_equal(out, forward(plain, (2, 2), (2, 2)))
        assert out.strides[1] == out.itemsize                      # channels innermost, as x
    ans = F._max_pool_forward(x, (2, 2), (2, 2))
    hits = F._first_maxima(x, ans, (2, 2), (2, 2))
    np.testing.assert_array_equal(hits, F._first_maxima(plain, ans, (2, 2), (2, 2)))
    g = rng.standard_normal(ans.shape[:1] + ans.shape[2:] + ans.shape[1:2]).transpose(0, 3, 1, 2)
    back = F._unpool_forward(g, hits, x.shape, (2, 2), (2, 2))      # g channels last, as from a conv
    assert back.strides[1] == back.itemsize
    plain_back = F._unpool_forward(np.ascontiguousarray(g), np.ascontiguousarray(hits), x.shape, (2, 2),
                                   (2, 2))
    np.testing.assert_array_equal(back, plain_back)


def test_cnn_gradients_unchanged_by_the_layouts():
    # the whole bench_cnn model in float64 against one step of central differences (both modes)
    rng = np.random.default_rng(0)
    model = tt.nn.Sequential(tt.nn.Conv2d(1, 4, 3, padding=1, rng=0, dtype=np.float64), tt.nn.ReLU(),
                             tt.nn.MaxPool2d(2), tt.nn.Conv2d(4, 6, 3, padding=1, rng=1, dtype=np.float64),
                             tt.nn.ReLU(), tt.nn.MaxPool2d(2), tt.nn.Flatten(),
                             tt.nn.Linear(24, 3, rng=2, dtype=np.float64))
    x = rng.uniform(0, 1, (5, 1, 8, 8))
    params = dict(model.named_parameters())
    names = ["0.weight", "3.weight", "7.weight"]

    def f(*ps):
        return (tt.nn.functional_call(model, dict(zip(names, ps)), x) ** 2).sum()
    assert tt.gradcheck(f, *[params[n].data for n in names])


def test_select_keeps_exact_zeros_for_infinite_or_huge_cotangents():
    mask = np.array([True, False, True, False])
    for g in (np.array([1.0, np.inf, -2.0, np.nan]), np.array([3e200, 3e200, 1.0, -3e200]),
              np.array([1.0, 2.0, 3.0, 4.0], np.float32)):
        out = _select(mask, g)
        np.testing.assert_array_equal(out, np.where(mask, g, 0))
        assert out.dtype == g.dtype
    z = np.array([1.0 + 2.0j, np.inf + 0j])
    np.testing.assert_array_equal(_select(np.array([True, False]), z), [1.0 + 2.0j, 0])


@pytest.mark.parametrize("channels", [1, 3, 16])
def test_conv2d_bias_gradient_in_either_layout_is_the_sum(channels):
    rng = np.random.default_rng(channels)
    g = rng.standard_normal((6, 5, 7, channels))
    for layout in (g.transpose(0, 3, 1, 2), np.ascontiguousarray(g.transpose(0, 3, 1, 2))):
        np.testing.assert_allclose(F._bias_gradient(layout), layout.sum(axis=(0, 2, 3)), rtol=1e-13)
