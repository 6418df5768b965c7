"""Issue 31's layers against PyTorch itself, when it is installed (skipped otherwise: the rest of
the suite checks them against PyTorch's formulas in NumPy). Each builds the torch layer in float64,
loads its state dict (as torch tensors: accepted as they are) into the tinytensor layer, and
compares outputs and input gradients."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the live comparisons are skipped")
R = np.random.default_rng(0)


def _compare(t_layer, layer, *inputs, call=None, out=lambda o: o, atol=1e-10):
    t_layer = t_layer.double()
    layer.load_state_dict(t_layer.state_dict())  # torch tensors, as handed over
    t_in = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    tt_in = [tt.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    call = call or (lambda m, *a: m(*a))
    t_out, tt_out = out(call(t_layer, *t_in)), out(call(layer, *tt_in))
    np.testing.assert_allclose(tt_out.data, t_out.detach().numpy(), atol=atol)
    weights = R.normal(size=tuple(t_out.shape))
    (t_out * torch.tensor(weights)).sum().backward()
    (tt_out * weights).sum().backward()
    for a, b in zip(t_in, tt_in):
        if a.requires_grad:
            np.testing.assert_allclose(b.grad, a.grad.numpy(), atol=atol)


@pytest.mark.parametrize(
    "kw",
    [
        dict(stride=2, padding=1),
        dict(dilation=2, groups=2, padding="same"),
        dict(padding=2, padding_mode="reflect"),
    ],
)
def test_conv1d(kw):
    _compare(
        torch.nn.Conv1d(4, 6, 3, **kw), nn.Conv1d(4, 6, 3, dtype=np.float64, **kw), R.normal(size=(2, 4, 9))
    )


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1, output_padding=1), dict(groups=2, dilation=2)])
def test_conv_transpose(kw):
    _compare(
        torch.nn.ConvTranspose2d(4, 6, 3, **kw),
        nn.ConvTranspose2d(4, 6, 3, dtype=np.float64, **kw),
        R.normal(size=(2, 4, 5, 5)),
    )
    _compare(
        torch.nn.ConvTranspose1d(4, 6, 3, **kw),
        nn.ConvTranspose1d(4, 6, 3, dtype=np.float64, **kw),
        R.normal(size=(2, 4, 7)),
    )


def test_norms():
    x = R.normal(size=(2, 6, 4, 5))
    _compare(torch.nn.GroupNorm(3, 6), nn.GroupNorm(3, 6, dtype=np.float64), x)
    _compare(torch.nn.InstanceNorm2d(6, affine=True), nn.InstanceNorm2d(6, affine=True, dtype=np.float64), x)
    _compare(torch.nn.RMSNorm(5), nn.RMSNorm(5, dtype=np.float64), x)


@pytest.mark.parametrize(
    "kw",
    [
        dict(scale_factor=2, mode="nearest"),
        dict(size=(7, 3), mode="nearest"),
        dict(size=(7, 9), mode="bilinear", align_corners=False),
        dict(scale_factor=1.7, mode="bilinear", align_corners=True),
        dict(size=(7, 9), mode="bicubic", align_corners=False),
        dict(scale_factor=2, mode="bicubic", align_corners=True),
    ],
)
def test_interpolate(kw):
    x = R.normal(size=(2, 3, 5, 4))
    _compare(torch.nn.Upsample(**kw), nn.Upsample(**kw), x)


@pytest.mark.parametrize("size", [(3, 2), (1, 1), (4, 6)])
def test_adaptive_pools(size):
    x = R.normal(size=(2, 3, 5, 7))
    _compare(torch.nn.AdaptiveAvgPool2d(size), nn.AdaptiveAvgPool2d(size), x)
    _compare(torch.nn.AdaptiveMaxPool2d(size), nn.AdaptiveMaxPool2d(size), x)


def test_activations():
    x = R.normal(size=(3, 4))
    for t_layer, layer in (
        (torch.nn.SiLU(), nn.SiLU()),
        (torch.nn.ELU(0.5), nn.ELU(0.5)),
        (torch.nn.Mish(), nn.Mish()),
        (torch.nn.PReLU(4), nn.PReLU(4, dtype=np.float64)),
    ):
        _compare(t_layer, layer, x)


def test_transformer_layers():
    torch.manual_seed(0)
    x = R.normal(size=(5, 2, 8))
    for norm_first in (False, True):
        t_layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first, dtype=np.float64)
        _compare(t_layer.eval(), layer.eval(), x)
    t_enc = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, enable_nested_tensor=False
    )
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=np.float64), 2)
    _compare(t_enc.eval(), enc.eval(), x)
    t_dec = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    dec = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, dtype=np.float64)
    _compare(t_dec.eval(), dec.eval(), x, R.normal(size=(4, 2, 8)))


def test_multihead_attention_options():
    q, k, v = R.normal(size=(3, 2, 8)), R.normal(size=(5, 2, 6)), R.normal(size=(5, 2, 4))
    t_m = torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=4, add_bias_kv=True, add_zero_attn=True)
    m = nn.MultiheadAttention(8, 2, kdim=6, vdim=4, add_bias_kv=True, add_zero_attn=True, dtype=np.float64)
    _compare(t_m, m, q, k, v, out=lambda o: o[0])


def test_lstm_proj_size_and_packing():
    t_lstm = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2, dtype=np.float64)
    x = R.normal(size=(6, 4, 3))
    lengths = [4, 6, 2, 5]

    def run(module, a):
        if isinstance(module, torch.nn.Module):
            utils = torch.nn.utils.rnn
            packed = utils.pack_padded_sequence(a, torch.tensor(lengths), enforce_sorted=False)
            out, _ = module(packed)
            return utils.pad_packed_sequence(out)[0]
        from tinytensor.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        out, _ = module(pack_padded_sequence(a, lengths, enforce_sorted=False))
        return pad_packed_sequence(out)[0]

    _compare(t_lstm, lstm, x, call=run)


def test_optimizer_state_from_pytorch_continues_equal():
    torch.manual_seed(0)
    t_model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    model = nn.Sequential(nn.Linear(3, 4, dtype=np.float64), nn.Tanh(), nn.Linear(4, 2, dtype=np.float64))
    model.load_state_dict(t_model.state_dict())
    t_opt = torch.optim.Adam(t_model.parameters(), lr=0.01)
    x, y = R.normal(size=(8, 3)), R.normal(size=(8, 2))
    for _ in range(3):
        t_opt.zero_grad()
        torch.nn.functional.mse_loss(t_model(torch.tensor(x)), torch.tensor(y)).backward()
        t_opt.step()
    model.load_state_dict(t_model.state_dict())
    opt = tt.optim.Adam(model.parameters(), lr=0.01)
    opt.load_state_dict(t_opt.state_dict())  # step as a 0-d tensor
    for _ in range(5):
        t_opt.zero_grad()
        torch.nn.functional.mse_loss(t_model(torch.tensor(x)), torch.tensor(y)).backward()
        t_opt.step()
        opt.zero_grad()
        nn.MSELoss()(model(x), y).backward()
        opt.step()
    for (name, p), q in zip(model.named_parameters(), t_model.parameters()):
        np.testing.assert_allclose(p.data, q.detach().numpy(), atol=1e-12, err_msg=name)


def test_whole_transformer():
    t_model = torch.nn.Transformer(8, 2, 2, 1, 16, dropout=0.0)
    model = nn.Transformer(8, 2, 2, 1, 16, dropout=0.0, dtype=np.float64)
    mask = nn.Transformer.generate_square_subsequent_mask(3, np.float64)
    _compare(
        t_model.eval(),
        model.eval(),
        R.normal(size=(5, 2, 8)),
        R.normal(size=(3, 2, 8)),
        call=lambda m, s, t: m(s, t, tgt_mask=torch.tensor(mask) if isinstance(m, torch.nn.Module) else mask),
    )


def test_max_pool_indices_and_unpool():
    x = R.normal(size=(2, 3, 6, 6))
    t_out, t_idx = torch.nn.MaxPool2d(3, 2, 1, return_indices=True)(torch.tensor(x))
    out, idx = nn.MaxPool2d(3, 2, 1, return_indices=True)(tt.tensor(x))
    np.testing.assert_array_equal(idx.data, t_idx.numpy())
    np.testing.assert_array_equal(out.data, t_out.numpy())
    t_back = torch.nn.MaxUnpool2d(3, 2, 1)(t_out, t_idx, output_size=x.shape)
    np.testing.assert_array_equal(nn.MaxUnpool2d(3, 2, 1)(out, idx, output_size=x.shape).data, t_back.numpy())


def test_adaptive_max_pool_indices():
    x = R.normal(size=(2, 3, 5, 7))
    t_out, t_idx = torch.nn.AdaptiveMaxPool2d((3, 2), return_indices=True)(torch.tensor(x))
    out, idx = nn.AdaptiveMaxPool2d((3, 2), return_indices=True)(tt.tensor(x))
    np.testing.assert_array_equal(idx.data, t_idx.numpy())
    np.testing.assert_array_equal(out.data, t_out.numpy())
