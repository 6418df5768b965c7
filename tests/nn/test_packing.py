"""nn.utils.rnn packing (PyTorch's semantics: each sequence runs over its own length only) and
LSTM(proj_size). The oracle for packing is each sequence run alone, without padding; for
proj_size, PyTorch's documented LSTMP formula in NumPy."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence, pad_sequence

LENGTHS = [3, 5, 1, 4]


def _layer(kind, **kw):
    cls = {"LSTM": nn.LSTM, "GRU": nn.GRU, "RNN": nn.RNN}[kind]
    return cls(3, 4, num_layers=2, bidirectional=True, rng=0, dtype=np.float64, **kw)


def _padded(B=4, T=5, seed=0):
    x = np.random.default_rng(seed).normal(size=(T, B, 3))
    for b, n in enumerate(LENGTHS):
        x[n:, b] = 99.0                     # padding that must never be read
    return x


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_packed_equals_each_sequence_alone(kind, batch_first):
    layer = _layer(kind, batch_first=batch_first)
    x = _padded()
    B = x.shape[1]
    h0 = np.random.default_rng(1).normal(size=(4, B, 4))
    hx = (h0, h0 * 0.5) if kind == "LSTM" else h0
    given = x.swapaxes(0, 1) if batch_first else x
    packed = pack_padded_sequence(tt.tensor(given), LENGTHS, batch_first=batch_first, enforce_sorted=False)
    out, state = layer(packed, hx)
    assert isinstance(out, PackedSequence)
    y, lengths = pad_packed_sequence(out, batch_first=batch_first)
    np.testing.assert_array_equal(lengths, LENGTHS)
    y = y.data.swapaxes(0, 1) if batch_first else y.data
    h_n = state[0] if kind == "LSTM" else state
    for b, n in enumerate(LENGTHS):
        seq = x[:n, b:b + 1]
        one_hx = (h0[:, b:b + 1], 0.5 * h0[:, b:b + 1]) if kind == "LSTM" else h0[:, b:b + 1]
        want, want_state = layer(seq.swapaxes(0, 1) if batch_first else seq, one_hx)
        want = want.data.swapaxes(0, 1) if batch_first else want.data
        np.testing.assert_allclose(y[:n, b], want[:, 0], atol=1e-13)
        assert np.all(y[n:, b] == 0)
        want_h = want_state[0] if kind == "LSTM" else want_state
        np.testing.assert_allclose(h_n.data[:, b], want_h.data[:, 0], atol=1e-13)
        if kind == "LSTM":
            np.testing.assert_allclose(state[1].data[:, b], want_state[1].data[:, 0], atol=1e-13)


def test_enforce_sorted_both_ways():
    x = tt.tensor(_padded())
    with pytest.raises(RuntimeError, match="decreasing order.*enforce_sorted=False"):
        pack_padded_sequence(x, LENGTHS)
    order = np.argsort(LENGTHS)[::-1]
    xs = tt.tensor(_padded()[:, order])
    p_sorted = pack_padded_sequence(xs, np.array(LENGTHS)[order])
    assert p_sorted.sorted_indices is None
    p_any = pack_padded_sequence(x, LENGTHS, enforce_sorted=False)
    np.testing.assert_array_equal(p_sorted.data.data, p_any.data.data)
    np.testing.assert_array_equal(p_sorted.batch_sizes, [4, 3, 3, 2, 1])
    layer = _layer("GRU")
    out_s, h_s = layer(p_sorted)
    out_a, h_a = layer(p_any)
    np.testing.assert_allclose(out_s.data.data, out_a.data.data, atol=1e-14)
    np.testing.assert_allclose(h_s.data, h_a.data[:, order], atol=1e-14)


def test_packing_errors_name_the_argument():
    x = tt.tensor(_padded())
    with pytest.raises(ValueError, match="exceeds the 5 time steps"):
        pack_padded_sequence(x, [6, 1, 1, 1], enforce_sorted=False)
    with pytest.raises(ValueError, match="4 lengths|3 lengths"):
        pack_padded_sequence(x, [3, 2, 1])
    with pytest.raises(ValueError, match="positive"):
        pack_padded_sequence(x, [3, 2, 1, 0])


def test_gradients_through_packing_and_the_rnn():
    layer = nn.GRU(2, 3, bidirectional=True, rng=0, dtype=np.float64)
    lengths = [3, 1, 2]
    x0 = np.random.default_rng(2).normal(size=(3, 3, 2))

    def f(x):
        out, h = layer(pack_padded_sequence(x, lengths, enforce_sorted=False))
        y, _ = pad_packed_sequence(out)
        return (y.sin() * np.linspace(0.1, 2.0, 54).reshape(3, 3, 6)).sum() + (h ** 2).sum()
    assert tt.gradcheck(f, tt.tensor(x0, requires_grad=True))
    g = tt.grad(f)(x0)
    for b, n in enumerate(lengths):
        assert np.all(g[n:, b] == 0)          # the padding gets no gradient


def test_pad_sequence():
    out = pad_sequence([tt.tensor(np.ones((2, 1))), tt.tensor(np.ones((3, 1)))], batch_first=True)
    np.testing.assert_array_equal(out.data[..., 0], [[1, 1, 0], [1, 1, 1]])


# ----- LSTM(proj_size) ---------------------------------------------------------------------------
def _sig(z):
    return 1 / (1 + np.exp(-z))


def _lstmp_reference(x, sd, H, layers, h0, c0):
    """PyTorch's LSTM with projections, one direction, in NumPy."""
    hs, cs = [], []
    for k in range(layers):
        W, U, R = sd[f"weight_ih_l{k}"], sd[f"weight_hh_l{k}"], sd[f"weight_hr_l{k}"]
        b = sd[f"bias_ih_l{k}"] + sd[f"bias_hh_l{k}"]
        h, c, out = h0[k], c0[k], []
        for t in range(x.shape[0]):
            z = x[t] @ W.T + h @ U.T + b
            i, f, g, o = _sig(z[:, :H]), _sig(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), _sig(z[:, 3 * H:])
            c = f * c + i * g
            h = (o * np.tanh(c)) @ R.T
            out.append(h)
        x = np.stack(out)
        hs.append(h)
        cs.append(c)
    return x, np.stack(hs), np.stack(cs)


def test_lstm_proj_size_is_pytorchs_lstmp():
    lstm = nn.LSTM(3, 5, num_layers=2, proj_size=2, rng=0, dtype=np.float64)
    sd = lstm.state_dict()
    assert list(sd)[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
    assert sd["weight_hh_l0"].shape == (20, 2) and sd["weight_hr_l0"].shape == (2, 5)
    assert sd["weight_ih_l1"].shape == (20, 2)
    r = np.random.default_rng(4)
    x, h0, c0 = r.normal(size=(4, 2, 3)), r.normal(size=(2, 2, 2)), r.normal(size=(2, 2, 5))
    out, (h_n, c_n) = lstm(x, (h0, c0))
    want = _lstmp_reference(x, sd, 5, 2, h0, c0)
    for got, w in zip((out, h_n, c_n), want):
        np.testing.assert_allclose(got.data, w, atol=1e-13)
    assert tt.gradcheck(lambda a: lstm(a, (h0, c0))[0].sum(), tt.tensor(x, requires_grad=True))
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 5, proj_size=5)
    with pytest.raises(TypeError, match="proj_size"):
        nn.GRU(3, 5, proj_size=2)


def test_lstm_proj_size_bidirectional_packed():
    lstm = nn.LSTM(3, 4, bidirectional=True, proj_size=2, rng=0, dtype=np.float64)
    x = _padded()
    out, (h, c) = lstm(pack_padded_sequence(tt.tensor(x), LENGTHS, enforce_sorted=False))
    y, _ = pad_packed_sequence(out)
    assert y.shape == (5, 4, 4) and h.shape == (2, 4, 2) and c.shape == (2, 4, 4)
    for b, n in enumerate(LENGTHS):
        want, (wh, _) = lstm(x[:n, b:b + 1])
        np.testing.assert_allclose(y.data[:n, b], want.data[:, 0], atol=1e-13)
        np.testing.assert_allclose(h.data[:, b], wh.data[:, 0], atol=1e-13)
