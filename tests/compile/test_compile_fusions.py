"""tt.compile's fused normalisation backward (compile/fusions.py, fuse_normalizations): where a
program computes y = c / sqrt(mean(c * c, axis, keepdims=True) [+ eps]) (layer norm, batch norm,
RMS norm), the chain of rules from y's cotangent to c's is one entry, (g - y mean(g y)) / s. It
fires exactly there; the values stay eager's bit for bit, the gradients eager's to rounding; a
chain shared with anything else is left as recorded."""

import numpy as np
import pytest

import tinytensor as tt


def _fused(f):
    """tt.compile(f, fuse=True): the fusions are opt-in (by default every number is eager's)."""
    return tt.compile(f, fuse=True)


def _layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    return xc / tt.sqrt((xc * xc).mean(-1, keepdims=True) + eps) * w + b


def _rms_norm(x, w):
    c = x * 1.0
    return c / tt.sqrt(tt.mean(c * c, axis=(-1,), keepdims=True)) * w


def _compare(f, args, fused=True, dtype=np.float64):
    args = [np.asarray(a, dtype) for a in args]
    eager = tt.value_and_grad(f, argnums=tuple(range(len(args))))
    step = _fused(eager)
    for call in range(2):                        # the trace, then the program on other values
        values = [a + 0.25 * call for a in args]
        (v, grads), (v0, grads0) = step(*values), eager(*values)
        assert v == v0                           # the forward is as recorded: bit for bit
        for g, g0 in zip(grads, grads0):
            rtol = 1e-12 if dtype == np.float64 else 1e-5
            np.testing.assert_allclose(g, g0, rtol=rtol, atol=rtol * np.abs(g0).max())
    assert ("normalized_vjp" in step.source) == fused, step.source
    return step


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_layer_norm_backward_is_fused(dtype):
    rng = np.random.default_rng(0)
    x, w, b, t = rng.standard_normal((6, 5, 16)), rng.standard_normal(16), rng.standard_normal(16), \
        rng.standard_normal((6, 5, 16))
    step = _compare(lambda x, w, b: tt.sum(tt.tanh(_layer_norm(x, w, b)) * t), [x, w, b], dtype=dtype)
    assert step.source.count("normalized_vjp(") == 1


def test_nn_layer_norm_batch_norm_and_rms_norm_are_fused():
    rng = np.random.default_rng(1)
    ln = tt.nn.LayerNorm(8, dtype=np.float64)
    bn = tt.nn.BatchNorm1d(8, dtype=np.float64)
    x = rng.standard_normal((10, 8))
    _compare(lambda x: tt.sum(tt.sin(ln(x))), [x])
    _compare(lambda x: tt.sum(bn(x) ** 3), [x])
    _compare(lambda x, w: tt.sum(tt.sin(_rms_norm(x, w))), [x, rng.standard_normal(8)])
    _compare(lambda x: tt.sum(tt.sin(tt.nn.LayerNorm((4, 2), dtype=np.float64)(x.reshape(10, 4, 2)))), [x])


def test_a_chain_shared_with_anything_else_is_left_as_recorded():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 8))

    def centred_used_twice(x):
        xc = x - x.mean(-1, keepdims=True)
        return tt.sum(tt.sin(xc / tt.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5))) + tt.sum(xc ** 3)

    def variance_used_twice(x):
        xc = x - x.mean(-1, keepdims=True)
        var = (xc * xc).mean(-1, keepdims=True)
        return tt.sum(tt.sin(xc / tt.sqrt(var + 1e-5))) + tt.sum(var)

    def a_different_norm(x):      # mean(c * c) over another axis than y is normalised over: no match
        c = x * 1.0
        return tt.sum(tt.sin(c / tt.sqrt((c * x).mean(-1, keepdims=True))))

    for f in (centred_used_twice, variance_used_twice, a_different_norm):
        _compare(f, [x], fused=False)


def test_second_order_through_a_fused_norm_is_eager():
    rng = np.random.default_rng(3)
    x, v = rng.standard_normal((3, 6)), rng.standard_normal((3, 6))
    f = lambda x: tt.sum(tt.tanh(_layer_norm(x, 1.0, 0.0)))      # noqa: E731
    hvp = _fused(lambda x, v: tt.hvp(f, (x,), (v,)))
    np.testing.assert_allclose(hvp(x, v), tt.hvp(f, (x,), (v,)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelu_keeps_its_cdf_for_the_backward(dtype):
    """compile/fusions.py keep_gelu_cdf: Phi(x) computed once in the forward, read again by the
    VJP (eager reads it back as ans / x): values bit for bit, gradients to rounding."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((8, 32)) * 2, rng.standard_normal((32, 32))
    step = _compare(lambda x, w: tt.sum(tt.nn.functional.gelu(x @ w) * 0.5), [x, w], fused=False, dtype=dtype)
    assert "ndtr(" in step.source and "gelu_vjp0(" in step.source and "cdf" in step.source
    forward_only = _fused(lambda x: tt.nn.functional.gelu(x))
    np.testing.assert_array_equal(forward_only(x.astype(dtype)), tt.nn.functional.gelu(x.astype(dtype)))
    assert "cdf" not in forward_only.source
    tanh = tt.grad(lambda x: tt.sum(tt.nn.functional.gelu(x, approximate="tanh")))
    np.testing.assert_array_equal(_fused(tanh)(x), tanh(x))
    scalar = _fused(tt.grad(lambda x: tt.nn.functional.gelu(x)))
    assert scalar(np.float64(0.3)) == tt.grad(lambda x: tt.nn.functional.gelu(x))(np.float64(0.3))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_softmax_cross_entropy_keeps_its_softmax_for_the_vjp(reduction):
    """softmax_cross_entropy(z, y) with class labels passed in: the forward computes the softmax
    in steps and the VJP reads it (codegen._shared_softmax_cross_entropy): eager bit for bit, the
    same label check."""
    rng = np.random.default_rng(5)
    z, y = rng.standard_normal((32, 7)).astype(np.float32), rng.integers(0, 7, 32)

    def loss(z, y):
        return tt.nn.functional.cross_entropy(tt.tanh(z) * 3, y, reduction=reduction)

    step = _fused(tt.value_and_grad(loss))
    for call in range(2):
        zz = z + call
        (v, g), (v0, g0) = step(zz, y), tt.value_and_grad(loss)(zz, y)
        assert v == v0 and np.array_equal(g, g0)
    assert "softmax_cross_entropy in steps" in step.source and "softmax_cross_entropy_vjp" not in step.source
    with pytest.raises(IndexError, match=r"class indices must lie in \[0, 7\)"):
        step(z, np.where(np.arange(32) == 3, 7, y))


def test_cotangents_of_pieces_of_one_array_go_into_one_array():
    """q, k, v sliced from one projection: their cotangents are written into one array of zeros
    (gather_piece_cotangents), not one array per piece added up: eager's values; overlapping
    pieces, fancy indices or another use of the array keep the sum as recorded."""
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((4, 5, 6)), rng.standard_normal((6, 12))

    def split(x, w):
        h = x @ w
        q, k, v = h[..., 0:4], h[..., 4:8], h[..., 8:12]
        return tt.sum(tt.tanh(q * k) * v)

    def overlapping(x, w):
        h = x @ w
        return tt.sum(tt.tanh(h[..., 0:6]) * h[..., 4:10])

    def fancy(x, w):
        h = x @ w
        return tt.sum(tt.sin(h[..., [0, 1]]) * h[..., 4:6])

    def also_whole(x, w):
        h = x @ w
        return tt.sum(tt.sin(h[..., 0:4]) * h[..., 4:8]) + tt.sum(h * h)

    def heads(x, w):                  # each piece reshaped into heads: written through a view
        h = x @ w
        q, k, v = (tt.transpose(tt.reshape(h[..., i:i + 4], (4, 5, 2, 2)), (0, 2, 1, 3)) for i in (0, 4, 8))
        return tt.sum(tt.tanh(q @ tt.swapaxes(k, -1, -2)) @ v)

    def flattened(x, w):              # a piece of a row-major array flattened: no such view, a copy
        h = (x @ w).reshape(20, 12)
        return tt.sum(tt.sin(tt.reshape(h[:, 0:4], (80,))) * tt.reshape(h[:, 6:10], (80,)))

    def elements(x, w):               # pieces that are single elements
        h = tt.reshape(x @ w, (-1,))
        return h[0] * h[1] + tt.sin(h[2])

    for f, fused in ((split, True), (heads, True), (flattened, True), (elements, True), (overlapping, False),
                     (fancy, False), (also_whole, False)):
        step = _fused(tt.value_and_grad(f, argnums=(0, 1)))
        for call in range(2):
            (v, g), (v0, g0) = step(x + call, w), tt.value_and_grad(f, argnums=(0, 1))(x + call, w)
            assert v == v0 and all(np.array_equal(a, b) for a, b in zip(g, g0)), f.__name__
        assert ("scatter_pieces(" in step.source) == fused, (f.__name__, step.source)


def test_layer_norm_of_an_inner_value_folds_its_centring_into_the_fused_backward():
    """c = x - mean(x): the negation, unbroadcast, spread and add that eager mode makes for the
    mean's path to x join the fused entry (centred_normalized_vjp), and x's other contributions
    (here the residual) are summed as before; a mean used elsewhere keeps its path."""
    rng = np.random.default_rng(8)
    x, t = rng.standard_normal((6, 5, 16)), rng.standard_normal((6, 5, 16))

    def block(x):                      # a residual around a layer norm, as in a transformer
        h = tt.tanh(x) * 2
        return tt.sum(tt.sin(_layer_norm(h, 1.5, 0.1)) * t + h * h)

    def mean_used_twice(x):
        h = tt.tanh(x) * 2
        mu = h.mean(-1, keepdims=True)
        xc = h - mu
        return tt.sum(tt.sin(xc / tt.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5)) * t) + tt.sum(mu ** 2)

    step = _compare(block, [x])
    assert "centred_normalized_vjp(" in step.source
    step = _compare(mean_used_twice, [x])
    assert "centred_normalized_vjp(" not in step.source and "normalized_vjp(" in step.source


def test_by_default_layer_norm_and_gelu_gradients_are_eagers_bit_for_bit():
    ln = tt.nn.LayerNorm(4, elementwise_affine=False)
    f = tt.value_and_grad(lambda x: tt.sum(tt.nn.functional.gelu(ln(x)) * tt.arange(4.0)))
    g = tt.compile(f)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.standard_normal((3, 4))
        (ve, ge), (vc, gc) = f(x), g(x)
        assert np.asarray(ve).tobytes() == np.asarray(vc).tobytes()
        assert np.asarray(ge).tobytes() == np.asarray(gc).tobytes()
    assert "fused" not in g.source and "ndtr(" not in g.source
