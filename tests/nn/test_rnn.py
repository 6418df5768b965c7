"""nn.RNN / LSTM / GRU and their cells: PyTorch's names, layouts, gate order, outputs and
gradients (stored PyTorch 2.x values and a NumPy reference here; a live comparison with PyTorch
when it is installed)."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

# ----- stored PyTorch values: float64, weights uniform(-0.6, 0.6) from default_rng(7) in state-dict
# order, x = linspace(-1, 1, 6).reshape(3, 1, 2), loss = out.sum() + (h_n ** 2).sum()
TORCH = {
    "LSTM": dict(
        out=[-0.037262112005126156, 0.017587170918836065, -0.026264125036740492, -0.04851742910325845,
             0.019947033285970577, -0.1498607802454106],
        dx=[-0.02186401948227775, -0.1312400618224302, 0.006225813169739703, -0.06948257715343886,
            0.034949603147215166, -0.013715684869565783],
        dWhh=[-0.0002785802085392922, -0.0011310497413380858, 0.0026239280884788486, 0.0012813645553462123,
              0.0005702573937827845, 5.7744216842268515e-05, -2.375019403772825e-05, 0.0004868564572453736,
              -0.012726085373167694, -0.0045418013325591745, -0.011462288887806402, 0.0007099313283762602,
              0.0001386130311960825, -0.0008040038073303967, 0.002688907465382939, 0.00237643212105333]),
    "GRU": dict(
        out=[-0.0761583162516843, 0.09998393758915025, 0.06905365407948692, -0.004617755982838395,
             0.2627398201947112, -0.22442548258972173],
        dx=[0.24336455083717423, -0.15233025330742003, 0.18467866419249776, -0.12399121205533471,
            0.20443153409075243, -0.08754660288113324],
        dWhh=[-0.0008406315381550423, 0.0043561535432507965, 0.0022770820252845233, -0.004372421750548985,
              -0.0026443346284245727, -0.007455080065258384, -0.0006613958870534831, 0.006517154267175742,
              -0.0010668265463119019, 0.03234549645523202, -0.007972789851764358, 0.01707293504589883]),
    "RNN": dict(
        out=[-0.305873189964251, -0.41143659036245384, 0.07421020997022593, -0.39143114420091235,
             0.4570590141064581, -0.5584437574679053],
        dx=[0.5076499012629272, -0.5012605207544492, 0.5638078642931913, -0.13556706925731116,
            0.20070169593810744, 0.7483022596425223],
        dWhh=[-0.09588494603585182, -0.8728581291096833, -0.43275692080218153, -0.5425966726214321]),
}


def _loaded(cls, input_size, hidden_size, seed=7, **kw):
    m = cls(input_size, hidden_size, dtype=np.float64, **kw)
    rng = np.random.default_rng(seed)
    m.load_state_dict({k: rng.uniform(-0.6, 0.6, v.shape) for k, v in m.state_dict().items()})
    return m


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_matches_stored_pytorch_outputs_and_gradients(name):
    m = _loaded(getattr(nn, name), 2, 2)
    x = tt.tensor(np.linspace(-1, 1, 6).reshape(3, 1, 2), requires_grad=True)
    out, state = m(x)
    h_n = state[0] if name == "LSTM" else state
    (out.sum() + (h_n ** 2).sum()).backward()
    ref = TORCH[name]
    np.testing.assert_allclose(out.data.ravel(), ref["out"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(x.grad.ravel(), ref["dx"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(m.weight_hh_l0.grad.ravel(), ref["dWhh"], rtol=1e-10, atol=1e-14)


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _numpy_layer(mode, p, x, h, c, sfx="l0"):
    """The textbook recurrences, in PyTorch's layout and gate order (time-major x)."""
    W, U = p[f"weight_ih_{sfx}"], p[f"weight_hh_{sfx}"]
    b, bh = p.get(f"bias_ih_{sfx}", 0), p.get(f"bias_hh_{sfx}", 0)
    H = U.shape[1]
    outs = []
    for xt in x:
        gi, gh = xt @ W.T + b, h @ U.T + bh
        if mode == "LSTM":
            i, f, g, o = np.split(gi + gh, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
        elif mode == "GRU":
            r = _sigmoid(gi[:, :H] + gh[:, :H])
            z = _sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
            n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
            h = (1 - z) * n + z * h
        else:
            h = np.tanh(gi + gh)
        outs.append(h)
    return np.stack(outs), h, c


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_two_layer_batch_first_matches_numpy_reference(name):
    m = _loaded(getattr(nn, name), 3, 4, num_layers=2, batch_first=True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 3))                 # (batch, time, features)
    h0, c0 = rng.normal(size=(2, 2, 4)), rng.normal(size=(2, 2, 4))
    lstm = name == "LSTM"
    out, state = m(x, (h0, c0) if lstm else h0)
    p = m.state_dict()
    seq = x.swapaxes(0, 1)
    hs, cs = [], []
    for layer in range(2):
        seq, h, c = _numpy_layer(name, p, seq, h0[layer], c0[layer], f"l{layer}")
        hs.append(h)
        cs.append(c)
    np.testing.assert_allclose(out.data, seq.swapaxes(0, 1), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose((state[0] if lstm else state).data, np.stack(hs), rtol=1e-12, atol=1e-13)
    if lstm:
        np.testing.assert_allclose(state[1].data, np.stack(cs), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_gradients_of_every_input_against_finite_differences(name):
    m = _loaded(getattr(nn, name), 2, 3, bidirectional=True)
    rng = np.random.default_rng(1)
    x, h0, c0 = rng.normal(size=(4, 2, 2)), rng.normal(size=(2, 2, 3)), rng.normal(size=(2, 2, 3))
    weights = np.cos(np.arange(4 * 2 * 6)).reshape(4, 2, 6)
    names = list(dict(m.named_parameters()))
    lstm = name == "LSTM"

    def loss(x, h0, *rest):
        c0, params = (rest[0], rest[1:]) if lstm else (None, rest)
        out, state = tt.nn.functional_call(m, dict(zip(names, params)), x, (h0, c0) if lstm else h0)
        extra = (state[1] ** 2).sum() if lstm else 0
        return (out * weights).sum() + ((state[0] if lstm else state) ** 3).sum() + extra

    assert tt.gradcheck(loss, x, h0, *([c0] if lstm else []), *[p.data.copy() for p in m.parameters()])


def test_parameter_names_shapes_and_init_are_pytorchs():
    m = nn.LSTM(3, 5, num_layers=2, bidirectional=True, rng=0)
    shapes = {k: v.shape for k, v in m.state_dict().items()}
    assert list(shapes)[:8] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
                                "bias_hh_l0_reverse"]
    assert shapes["weight_ih_l0"] == (20, 3) and shapes["weight_hh_l0"] == (20, 5)
    assert shapes["weight_ih_l1"] == (20, 10) and shapes["bias_hh_l1_reverse"] == (20,)
    assert all(isinstance(p, nn.Parameter) and p.dtype == np.float32 for p in m.parameters())
    bound = 1 / np.sqrt(5)
    assert all(np.abs(p.data).max() <= bound for p in m.parameters())
    assert list(nn.GRU(2, 4, bias=False).state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    assert nn.GRU(2, 4).weight_hh_l0.shape == (12, 4)
    assert list(nn.RNNCell(2, 3).state_dict()) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]


def test_shapes_unbatched_default_state_and_float32():
    m = nn.LSTM(3, 4, num_layers=2, rng=0)
    out, (h, c) = m(np.ones((6, 2, 3)))
    assert out.shape == (6, 2, 4) and h.shape == (2, 2, 4) and c.shape == (2, 2, 4)
    assert out.dtype == np.float32 and h.dtype == np.float32
    out1, (h1, c1) = m(np.ones((6, 3)))                       # unbatched
    assert out1.shape == (6, 4) and h1.shape == (2, 4)
    np.testing.assert_allclose(out1.data, out.data[:, 0], rtol=1e-6)
    g = nn.GRU(3, 4, bidirectional=True, batch_first=True, rng=0)
    out, h = g(np.ones((2, 6, 3)))
    assert out.shape == (2, 6, 8) and h.shape == (2, 2, 4)


def test_cells_are_one_step_of_the_layer():
    rng = np.random.default_rng(3)
    x, h0, c0 = rng.normal(size=(2, 3)), rng.normal(size=(2, 4)), rng.normal(size=(2, 4))
    for layer_cls, cell_cls in ((nn.LSTM, nn.LSTMCell), (nn.GRU, nn.GRUCell), (nn.RNN, nn.RNNCell)):
        layer = _loaded(layer_cls, 3, 4)
        cell = cell_cls(3, 4, dtype=np.float64)
        cell.load_state_dict({k[:-3]: v for k, v in layer.state_dict().items()})
        lstm = layer_cls is nn.LSTM
        _, state = layer(x[None], (h0[None], c0[None]) if lstm else h0[None])
        step = cell(x, (h0, c0) if lstm else h0)
        if lstm:
            np.testing.assert_allclose(step[0].data, state[0].data[0], rtol=1e-13)
            np.testing.assert_allclose(step[1].data, state[1].data[0], rtol=1e-13)
        else:
            np.testing.assert_allclose(step.data, state.data[0], rtol=1e-13)
        unbatched = cell(x[0], (h0[0], c0[0]) if lstm else h0[0])
        np.testing.assert_allclose((unbatched[0] if lstm else unbatched).data,
                                   (step[0] if lstm else step).data[0], rtol=1e-13)


def test_relu_rnn_and_training_reduces_the_loss():
    rng = np.random.default_rng(0)
    m = nn.RNN(2, 8, nonlinearity="relu", rng=0, dtype=np.float64)
    head = nn.Linear(8, 1, rng=1, dtype=np.float64)
    x = rng.normal(size=(5, 16, 2))
    y = x.sum(axis=(0, 2))[:, None]
    opt = tt.optim.Adam(list(m.parameters()) + list(head.parameters()), lr=0.02)
    losses = []
    for _ in range(40):
        out, h = m(x)
        loss = ((head(h[0]) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_clear_errors():
    m = nn.LSTM(3, 4)
    with pytest.raises(ValueError, match=r"LSTM: expected input of shape \(seq_len, batch, 3\)"):
        m(np.ones((5, 2, 2)))
    with pytest.raises(ValueError, match="initial hidden state h_0 has shape"):
        m(np.ones((5, 2, 3)), (np.zeros((1, 3, 4)), np.zeros((1, 2, 4))))
    with pytest.raises(TypeError, match=r"tuple \(h_0, c_0\)"):
        m(np.ones((5, 2, 3)), np.zeros((1, 2, 4)))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(2, 3, nonlinearity="sigmoid")


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_second_derivatives_through_the_loop(name):
    m = _loaded(getattr(nn, name), 2, 3)
    x = np.random.default_rng(4).normal(size=(3, 2, 2))
    v = np.random.default_rng(5).normal(size=x.shape)
    f = lambda x: (m(x)[0] ** 3).sum()                        # noqa: E731
    grad = tt.grad(f)
    eps = 1e-6
    numeric = (grad(x + eps * v) - grad(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(tt.hvp(f, (x,), (v,)), numeric, rtol=1e-6, atol=1e-8)
    rev = tt.grad(lambda x: (grad(x) * v).sum())(x)
    np.testing.assert_allclose(rev, numeric, rtol=1e-6, atol=1e-8)


def test_against_pytorch_live():
    torch = pytest.importorskip("torch")
    for t_cls, cls, kw in ((torch.nn.LSTM, nn.LSTM, dict(num_layers=2, bidirectional=True)),
                           (torch.nn.GRU, nn.GRU, dict(batch_first=True)),
                           (torch.nn.RNN, nn.RNN, dict(nonlinearity="relu", bias=False))):
        torch.manual_seed(0)
        ref = t_cls(3, 4, **kw).double()
        m = cls(3, 4, dtype=np.float64, **kw)
        m.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
        x = np.random.default_rng(0).normal(size=(5, 2, 3))
        xt = torch.tensor(x, requires_grad=True)
        out_t, _ = ref(xt)
        (out_t ** 2).sum().backward()
        xx = tt.tensor(x, requires_grad=True)
        out, _ = m(xx)
        (out ** 2).sum().backward()
        np.testing.assert_allclose(out.data, out_t.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(xx.grad, xt.grad.numpy(), rtol=1e-10, atol=1e-12)
        for k, p in ref.named_parameters():
            np.testing.assert_allclose(getattr(m, k).grad, p.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_dropout_between_layers_only_in_training():
    m = nn.GRU(3, 4, num_layers=2, dropout=0.5, rng=0, dtype=np.float64)
    plain = _loaded(nn.GRU, 3, 4, num_layers=2)
    m.load_state_dict(plain.state_dict())
    x = np.random.default_rng(0).normal(size=(4, 2, 3))
    a, b = m(x)[0].data, m(x)[0].data
    assert not np.allclose(a, b)                      # a new mask per call
    m.eval()
    np.testing.assert_allclose(m(x)[0].data, plain(x)[0].data, rtol=1e-14)
    assert repr(m) == "GRU(3, 4, num_layers=2, dropout=0.5)"


# ----- the LSTM backward's NumPy loop (rnn._lstm_vjp_numpy) against the general code ------------
class _Plain(np.ndarray):
    """An ndarray subclass: rnn's fast NumPy loop takes plain ndarrays only, so this takes the
    general code path (the one Tensors and other array libraries run)."""


@pytest.mark.parametrize("T, B, H", [(1, 1, 1), (3, 2, 1), (4, 3, 5), (2, 1, 8), (7, 2, 3)])
@pytest.mark.parametrize("block_bytes", [1, 200, 2**20])    # steps per block: 1, a few, all
@pytest.mark.parametrize("cotangent", ["all", "h only"])    # with all columns, or as a layer gives it
def test_lstm_fast_loops_equal_the_general_code(T, B, H, block_bytes, cotangent, monkeypatch):
    from tinytensor.nn import rnn
    monkeypatch.setattr(rnn, "_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(T * 100 + B * 10 + H)
    xp, h0, c0 = rng.normal(size=(T, B, 4 * H)), rng.normal(size=(B, H)), rng.normal(size=(B, H))
    whh = rng.normal(size=(4 * H, H))
    gY = rng.normal(size=(T, B, 6 * H))            # every column, the gates' too ...
    if cotangent == "h only":                       # ... or h's, and c's at the last step (c_n)
        gY[:, :, H:] = 0
        gY[-1, :, H:2 * H] = rng.normal(size=(B, H))
    kept = whh.copy()
    fast = rnn._lstm_forward(xp, h0, c0, whh)
    np.testing.assert_array_equal(whh, kept)   # never scaled in place (H = 1: whh.T is C order)
    plain = [a.view(_Plain) for a in (xp, h0, c0, whh)]
    general = np.asarray(rnn._lstm_forward(*plain))
    np.testing.assert_allclose(fast, general, rtol=1e-14, atol=1e-15)
    fast_grads = rnn._lstm_vjp(gY, fast, xp, h0, c0, whh)
    general_grads = rnn._lstm_vjp(gY.view(_Plain), general.view(_Plain), *plain)
    for name, a, b in zip(("xp", "h0", "c0", "whh"), fast_grads, general_grads):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-14, err_msg=name)


def test_lstm_backward_on_an_empty_batch():
    m = nn.LSTM(3, 4, rng=0)
    out, (h, _) = m(tt.tensor(np.zeros((5, 0, 3), np.float32)))
    (out.sum() + h.sum()).backward()
    assert out.shape == (5, 0, 4)
    np.testing.assert_array_equal(m.weight_hh_l0.grad, np.zeros((16, 4), np.float32))
