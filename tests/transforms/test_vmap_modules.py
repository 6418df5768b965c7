"""tt.vmap with modules: nn.functional_call inside vmap for every layer, per-example gradients
summed over the batch equal the batch gradient (float64, 1e-12), Dropout's randomness= and
BatchNorm's refusal in train() / exact running statistics in eval()."""

import numpy as np
import pytest

import tinytensor as tt

nn = tt.nn
F64 = np.float64
B = 3


def _layers():
    """(name, model, example input maker): each model ends in something with parameters or
    follows a Linear, so that every layer's rule is on the gradient's path."""
    r = np.random.default_rng(0)
    lin = lambda i, o: nn.Linear(i, o, rng=1, dtype=F64)   # noqa: E731
    vec = lambda n: lambda: r.standard_normal((1, n))    # noqa: E731  one example as a batch of one
    img = lambda: r.standard_normal((1, 2, 5, 5))       # noqa: E731
    seq = lambda: r.standard_normal((4, 1, 3))          # noqa: E731  (T, N=1, features)
    bn1 = nn.BatchNorm1d(4, dtype=F64)
    bn1.running_mean[...] = r.standard_normal(4)
    bn1.running_var[...] = r.uniform(0.5, 2.0, 4)
    bn1.eval()
    bn2 = nn.BatchNorm2d(2, dtype=F64)
    bn2.running_mean[...] = r.standard_normal(2)
    bn2.eval()
    drop = nn.Dropout(0.5)
    drop.eval()
    return [
        ("Linear", nn.Sequential(lin(3, 4)), vec(3)),
        ("Linear-nobias", nn.Sequential(nn.Linear(3, 4, bias=False, rng=2, dtype=F64)), vec(3)),
        ("ReLU", nn.Sequential(lin(3, 4), nn.ReLU()), vec(3)),
        ("Tanh", nn.Sequential(lin(3, 4), nn.Tanh()), vec(3)),
        ("Sigmoid", nn.Sequential(lin(3, 4), nn.Sigmoid()), vec(3)),
        ("LeakyReLU", nn.Sequential(lin(3, 4), nn.LeakyReLU(0.1)), vec(3)),
        ("GELU", nn.Sequential(lin(3, 4), nn.GELU()), vec(3)),
        ("Softplus", nn.Sequential(lin(3, 4), nn.Softplus()), vec(3)),
        ("Softmax", nn.Sequential(lin(3, 4), nn.Softmax(axis=-1)), vec(3)),
        ("LogSoftmax", nn.Sequential(lin(3, 4), nn.LogSoftmax(axis=-1)), vec(3)),
        ("Identity", nn.Sequential(lin(3, 4), nn.Identity()), vec(3)),
        ("Dropout-eval", nn.Sequential(lin(3, 4), drop), vec(3)),
        ("LayerNorm", nn.Sequential(lin(3, 4), nn.LayerNorm(4, dtype=F64)), vec(3)),
        ("BatchNorm1d-eval", nn.Sequential(lin(3, 4), bn1), vec(3)),
        ("Conv2d", nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, rng=3, dtype=F64)), img),
        ("Conv2d-stride", nn.Sequential(nn.Conv2d(2, 2, 2, stride=2, rng=4, dtype=F64)), img),
        ("BatchNorm2d-eval", nn.Sequential(nn.Conv2d(2, 2, 3, rng=5, dtype=F64), bn2), img),
        ("MaxPool2d", nn.Sequential(nn.Conv2d(2, 2, 3, padding=1, rng=6, dtype=F64), nn.MaxPool2d(2)), img),
        ("AvgPool2d", nn.Sequential(nn.Conv2d(2, 2, 3, padding=1, rng=7, dtype=F64), nn.AvgPool2d(2)), img),
        ("Flatten", nn.Sequential(nn.Conv2d(2, 1, 3, rng=8, dtype=F64), nn.Flatten(), lin(9, 2)), img),
        ("Embedding", nn.Sequential(nn.Embedding(6, 3, rng=9, dtype=F64), lin(3, 2)),
         lambda: r.integers(0, 6, (1, 4))),
        ("RNN", nn.RNN(3, 4, rng=10, dtype=F64), seq),
        ("LSTM", nn.LSTM(3, 4, rng=11, dtype=F64), seq),
        ("GRU", nn.GRU(3, 4, rng=12, dtype=F64), seq),
        ("RNNCell", nn.RNNCell(3, 4, rng=13, dtype=F64), vec(3)),
        ("LSTMCell", nn.LSTMCell(3, 4, rng=14, dtype=F64), vec(3)),
        ("GRUCell", nn.GRUCell(3, 4, rng=15, dtype=F64), vec(3)),
        ("MultiheadAttention", nn.MultiheadAttention(4, 2, rng=16, dtype=F64),
         lambda: r.standard_normal((3, 1, 4))),
    ]


def _scalar(out):
    """A fixed weighted sum of whatever the layer returns (a Tensor, or a tuple of them)."""
    parts = out if isinstance(out, (tuple, list)) else (out,)
    total = 0.0
    for k, p in enumerate(parts):
        if isinstance(p, (tuple, list)):
            total = total + _scalar(p)
            continue
        w = np.cos(np.arange(int(np.prod(p.shape))).reshape(p.shape) + k)
        total = total + tt.sum(p * w)
    return total


def _example(out, i, axis, attention=False):
    """Example i's part of a layer's output on the batch (batch axis `axis`; attention's weights,
    (N, L, S), have it first)."""
    if isinstance(out, (tuple, list)):
        axes = [axis, 0] if attention else [axis] * len(out)
        return type(out)(_example(o, i, a) for o, a in zip(out, axes))
    return out[(slice(None),) * axis + (slice(i, i + 1),)]


def _call(model, p, x):
    if isinstance(model, nn.MultiheadAttention):
        return tt.nn.functional_call(model, p, x, x, x)
    return tt.nn.functional_call(model, p, x)


@pytest.mark.parametrize("name, model, make", _layers(), ids=[c[0] for c in _layers()])
def test_per_example_gradients_sum_to_the_batch_gradient(name, model, make):
    params = {k: v.data for k, v in model.named_parameters()}
    examples = np.stack([make() for _ in range(B)])         # (B, one example as a batch of one)
    axis = 1 if name in ("RNN", "LSTM", "GRU", "MultiheadAttention") else 0   # (T, N, ...) inputs

    def loss(p, x):
        return _scalar(_call(model, p, x))

    per_example = tt.vmap(tt.grad(loss), in_axes=(None, 0))(params, examples)
    batch = np.concatenate(list(examples), axis=axis)     # the batch, as the layer takes it

    def batch_loss(p):      # one forward on the whole batch; each example's slice weighted as alone
        out = _call(model, p, batch)
        return sum(_scalar(_example(out, i, axis, name == "MultiheadAttention")) for i in range(B))

    whole = tt.grad(batch_loss)(params)
    for k in params:
        assert per_example[k].shape == (B,) + params[k].shape
        np.testing.assert_allclose(per_example[k].sum(0), whole[k], rtol=1e-12, atol=1e-12, err_msg=k)
    # and the values: vmap of the layer equals the layer per example
    out = tt.vmap(lambda x: _scalar(_call(model, params, x)))(examples)
    ref = np.array([_scalar(_call(model, params, examples[i])).item() for i in range(B)])
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
