"""The layers of issue 31 against PyTorch's documented formulas written in NumPy (and, for
interpolate, values PyTorch gives that its documentation shows), both modes through tt.gradcheck,
and PyTorch's state-dict keys (a state dict as arrays loads)."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import functional as F

R = np.random.default_rng(0)


def _t(a):
    return tt.tensor(a, requires_grad=True)


# ----- convolutions: direct loops over PyTorch's definitions ------------------------------------
def conv1d_ref(x, w, b, stride, padding, dilation, groups):
    N, C, L = x.shape
    O, Cg, K = w.shape  # noqa: E741  (the output channels)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    Lo = (L + 2 * padding - dilation * (K - 1) - 1) // stride + 1
    out = np.zeros((N, O, Lo))
    og = O // groups
    for o in range(O):
        g = o // og
        for i in range(Lo):
            for k in range(K):
                out[:, o, i] += xp[:, g * Cg : (g + 1) * Cg, i * stride + k * dilation] @ w[o, :, k]
    return out + (0 if b is None else b[None, :, None])


def conv_t2d_ref(x, w, b, stride, padding, output_padding, groups, dilation):
    """out[n, o, y, x] += x[n, c, i, j] w[c, o', p, q] at y = i s - pad + p d (PyTorch's definition)."""
    N, C, H, W = x.shape
    _, Og, KH, KW = w.shape
    Ho = (H - 1) * stride - 2 * padding + dilation * (KH - 1) + output_padding + 1
    Wo = (W - 1) * stride - 2 * padding + dilation * (KW - 1) + output_padding + 1
    out = np.zeros((N, Og * groups, Ho, Wo))
    cg = C // groups
    for c in range(C):
        g = c // cg
        for i in range(H):
            for j in range(W):
                for p in range(KH):
                    for q in range(KW):
                        y, z = i * stride - padding + p * dilation, j * stride - padding + q * dilation
                        if 0 <= y < Ho and 0 <= z < Wo:
                            out[:, g * Og : (g + 1) * Og, y, z] += x[:, c, i, j][:, None] * w[c, :, p, q]
    return out + (0 if b is None else b[None, :, None, None])


@pytest.mark.parametrize(
    "stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 2), (1, 2, 2, 1), (3, 1, 2, 2)]
)
def test_conv1d_is_the_definition(stride, padding, dilation, groups):
    m = nn.Conv1d(
        4, 6, 3, stride=stride, padding=padding, dilation=dilation, groups=groups, rng=0, dtype=np.float64
    )
    assert m.weight.shape == (6, 4 // groups, 3) and list(m.state_dict()) == ["weight", "bias"]
    x = R.normal(size=(2, 4, 11))
    np.testing.assert_allclose(
        m(x).data, conv1d_ref(x, m.weight.data, m.bias.data, stride, padding, dilation, groups), atol=1e-13
    )
    assert tt.gradcheck(
        lambda a, w: F.conv1d(a, w, None, stride, padding, dilation, groups).sin().sum(),
        _t(x[:1]),
        _t(m.weight.data),
    )


def test_conv1d_same_padding_with_an_even_kernel_pads_right_more():
    m = nn.Conv1d(2, 3, 4, padding="same", rng=0, dtype=np.float64)
    x = R.normal(size=(1, 2, 7))
    want = conv1d_ref(np.pad(x, ((0, 0), (0, 0), (1, 2))), m.weight.data, m.bias.data, 1, 0, 1, 1)
    np.testing.assert_allclose(m(x).data, want, atol=1e-13)
    assert m(x[0]).shape == (3, 7)  # unbatched


@pytest.mark.parametrize(
    "stride,padding,output_padding,groups,dilation",
    [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (2, 0, 1, 2, 1), (3, 2, 0, 1, 2), (2, 1, 1, 2, 2)],
)
def test_conv_transpose2d_is_the_definition(stride, padding, output_padding, groups, dilation):
    m = nn.ConvTranspose2d(
        4,
        6,
        (3, 2),
        stride=stride,
        padding=padding,
        output_padding=output_padding,
        groups=groups,
        dilation=dilation,
        rng=0,
        dtype=np.float64,
    )
    assert m.weight.shape == (4, 6 // groups, 3, 2)
    x = R.normal(size=(2, 4, 4, 5))
    want = conv_t2d_ref(x, m.weight.data, m.bias.data, stride, padding, output_padding, groups, dilation)
    np.testing.assert_allclose(m(x).data, want, atol=1e-13)
    f = lambda a, w: F.conv_transpose2d(a, w, None, stride, padding, output_padding, groups, dilation)  # noqa: E731
    assert tt.gradcheck(lambda a, w: f(a, w).sin().sum(), _t(x[:1, :, :3, :3]), _t(m.weight.data))


def test_conv_transpose_is_conv2ds_adjoint_and_output_size():
    w = R.normal(size=(3, 2, 3, 3))
    x, y = R.normal(size=(1, 3, 5, 5)), R.normal(size=(1, 2, 10, 10))
    up = F.conv_transpose2d(tt.tensor(x), w, stride=2, padding=1, output_padding=1)
    down = F.conv2d(tt.tensor(y), w, stride=2, padding=1)
    np.testing.assert_allclose(np.sum(up.data * y), np.sum(x * down.data), rtol=1e-12)
    m = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, rng=0)
    assert m(x, output_size=(10, 10)).shape == (1, 2, 10, 10)
    with pytest.raises(ValueError, match="output_padding"):
        nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=2)


def conv_t1d_ref(x, w, b, stride, padding, output_padding, groups):
    N, C, L = x.shape
    _, Og, K = w.shape
    Lo = (L - 1) * stride - 2 * padding + (K - 1) + output_padding + 1
    out = np.zeros((N, Og * groups, Lo))
    cg = C // groups
    for c in range(C):
        g = c // cg
        for i in range(L):
            for k in range(K):
                y = i * stride - padding + k
                if 0 <= y < Lo:
                    out[:, g * Og : (g + 1) * Og, y] += x[:, c, i][:, None] * w[c, :, k]
    return out + b[None, :, None]


def test_conv_transpose1d_is_the_definition():
    m = nn.ConvTranspose1d(2, 4, 3, stride=2, padding=1, output_padding=1, groups=2, rng=0, dtype=np.float64)
    assert m.weight.shape == (2, 2, 3) and list(m.state_dict()) == ["weight", "bias"]
    x = R.normal(size=(3, 2, 6))
    np.testing.assert_allclose(m(x).data, conv_t1d_ref(x, m.weight.data, m.bias.data, 2, 1, 1, 2), atol=1e-13)
    assert tt.gradcheck(lambda a: m(a).sin().sum(), _t(x[:1]))


# ----- normalisation ------------------------------------------------------------------------------
def test_group_norm_is_the_formula():
    m = nn.GroupNorm(2, 6, dtype=np.float64)
    m.weight.data[:] = R.normal(size=6)
    m.bias.data[:] = R.normal(size=6)
    x = R.normal(size=(2, 6, 3, 4))
    g = x.reshape(2, 2, -1)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    want = want * m.weight.data[:, None, None] + m.bias.data[:, None, None]
    np.testing.assert_allclose(m(x).data, want, atol=1e-13)
    assert tt.gradcheck(lambda a, w: F.group_norm(a, 3, w, None).sin().sum(), _t(x[:1]), _t(np.ones(6)))
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(4, 6)


def test_instance_norm_formula_and_running_stats():
    x = R.normal(size=(3, 2, 4, 5))
    m = nn.InstanceNorm2d(2, dtype=np.float64)
    assert list(m.state_dict()) == []
    want = (x - x.mean((2, 3), keepdims=True)) / np.sqrt(x.var((2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(m(x).data, want, atol=1e-13)
    t = nn.InstanceNorm2d(2, affine=True, track_running_stats=True, dtype=np.float64)
    assert list(t.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    t(x)
    np.testing.assert_allclose(t.running_mean.data, 0.1 * x.mean((2, 3)).mean(0), atol=1e-14)
    np.testing.assert_allclose(t.running_var.data, 0.9 + 0.1 * x.var((2, 3), ddof=1).mean(0), atol=1e-14)
    t.eval()
    rm, rv = t.running_mean.data[:, None, None], t.running_var.data[:, None, None]
    np.testing.assert_allclose(t(x).data, (x - rm) / np.sqrt(rv + 1e-5), atol=1e-13)
    assert tt.gradcheck(lambda a: F.instance_norm(a).sin().sum(), _t(x[:1]))


def test_rms_norm_is_the_formula():
    m = nn.RMSNorm((3, 4), dtype=np.float64)
    m.weight.data[:] = R.normal(size=(3, 4))
    x = R.normal(size=(2, 3, 4))
    eps = np.finfo(np.float64).eps
    want = x / np.sqrt((x**2).mean((1, 2), keepdims=True) + eps) * m.weight.data
    np.testing.assert_allclose(m(x).data, want, atol=1e-13)
    assert list(m.state_dict()) == ["weight"]
    assert tt.gradcheck(lambda a: F.rms_norm(a, 4, eps=1e-6).sin().sum(), _t(x))


# ----- interpolate: the values PyTorch's documentation shows, and its index formulas -------------
GRID = np.arange(4.0).reshape(1, 1, 2, 2)


def test_interpolate_pytorchs_known_values():
    up = lambda **kw: F.interpolate(tt.tensor(GRID), scale_factor=2, **kw).data[0, 0]  # noqa: E731
    np.testing.assert_allclose(
        up(mode="bilinear", align_corners=False),
        [[0, 0.25, 0.75, 1], [0.5, 0.75, 1.25, 1.5], [1.5, 1.75, 2.25, 2.5], [2, 2.25, 2.75, 3]],
    )
    np.testing.assert_allclose(
        up(mode="bilinear", align_corners=True) * 3,
        [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7], [6, 7, 8, 9]],
        atol=1e-14,
    )
    np.testing.assert_array_equal(
        up(mode="nearest"), [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]]
    )


def _linear_ref(x, n_out, align, scale=None):
    """PyTorch's upsample_linear1d along the last axis."""
    n = x.shape[-1]
    s = ((n - 1) / (n_out - 1) if n_out > 1 else 0) if align else (1 / scale if scale else n / n_out)
    out = np.empty(x.shape[:-1] + (n_out,))
    for d in range(n_out):
        src = d * s if align else max(s * (d + 0.5) - 0.5, 0)
        i0 = min(int(np.floor(src)), n - 1)
        i1 = i0 + (1 if i0 < n - 1 else 0)
        lam = src - i0
        out[..., d] = (1 - lam) * x[..., i0] + lam * x[..., i1]
    return out


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(7, 3), (3, 9), (5, 5), (1, 2)])
def test_bilinear_both_alignments_is_separable_linear(align, size):
    x = R.normal(size=(2, 3, 5, 4))
    got = F.interpolate(tt.tensor(x), size=size, mode="bilinear", align_corners=align).data
    want = np.swapaxes(
        _linear_ref(np.swapaxes(_linear_ref(x, size[1], align), -1, -2), size[0], align), -1, -2
    )
    np.testing.assert_allclose(got, want, atol=1e-13)
    assert tt.gradcheck(
        lambda a: F.interpolate(a, size=size, mode="bilinear", align_corners=align).sin().sum(), _t(x[:1, :1])
    )


def test_nearest_index_and_errors():
    x = R.normal(size=(1, 2, 5))
    got = F.interpolate(tt.tensor(x), size=3).data  # floor(d * 5 / 3): 0, 1, 3
    np.testing.assert_array_equal(got, x[..., [0, 1, 3]])
    got = F.interpolate(tt.tensor(x), scale_factor=1.5).data  # 7 outputs, floor(d / 1.5)
    np.testing.assert_array_equal(got, x[..., [0, 0, 1, 2, 2, 3, 4]])
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(tt.tensor(x), size=3, align_corners=True)
    with pytest.raises(ValueError, match="bilinear.*4-D"):
        F.interpolate(tt.tensor(x), size=3, mode="bilinear")
    with pytest.raises(ValueError, match="exactly one"):
        F.interpolate(tt.tensor(x))
    up = nn.Upsample(scale_factor=2, mode="nearest")
    assert up(tt.tensor(R.normal(size=(1, 1, 2, 3)))).shape == (1, 1, 4, 6)


# ----- adaptive pooling: PyTorch's bins ----------------------------------------------------------
def _bins(n, m):
    return [(i * n // m, -(-(i + 1) * n // m)) for i in range(m)]


@pytest.mark.parametrize("out", [(3, 2), (1, 1), (5, 7), (4, 3)])
def test_adaptive_pools_are_the_bins(out):
    x = R.normal(size=(2, 3, 5, 7))
    want_avg = np.zeros((2, 3) + out)
    want_max = np.zeros((2, 3) + out)
    for i, (a, b) in enumerate(_bins(5, out[0])):
        for j, (c, d) in enumerate(_bins(7, out[1])):
            want_avg[..., i, j] = x[..., a:b, c:d].mean((-1, -2))
            want_max[..., i, j] = x[..., a:b, c:d].max((-1, -2))
    np.testing.assert_allclose(nn.AdaptiveAvgPool2d(out)(tt.tensor(x)).data, want_avg, atol=1e-14)
    np.testing.assert_array_equal(nn.AdaptiveMaxPool2d(out)(tt.tensor(x)).data, want_max)
    assert tt.gradcheck(lambda a: F.adaptive_avg_pool2d(a, out).sin().sum(), _t(x[:1, :1]))
    assert tt.gradcheck(lambda a: F.adaptive_max_pool2d(a, out).sin().sum(), _t(x[:1, :1]))
    assert nn.AdaptiveAvgPool2d((None, 2))(tt.tensor(x)).shape == (2, 3, 5, 2)


# ----- dropout2d, activations --------------------------------------------------------------------
def test_dropout2d_drops_whole_channels():
    m = nn.Dropout2d(0.5, rng=0)
    out = m(tt.tensor(np.ones((8, 16, 3, 3)))).data
    per_channel = out.reshape(8, 16, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    assert 0 < (per_channel == 0).all(-1).mean() < 1
    m.eval()
    assert m(tt.tensor(np.ones((2, 2, 2, 2)))).data.sum() == 16


X = np.array([-3.0, -0.5, -1e-3, 0.2, 4.0])


@pytest.mark.parametrize(
    "layer,formula",
    [
        (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
        (nn.Mish(), lambda x: x * np.tanh(np.log1p(np.exp(x)))),
        (nn.ELU(alpha=0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
        (nn.PReLU(dtype=np.float64), lambda x: np.where(x > 0, x, 0.25 * x)),
    ],
)
def test_activations_are_the_formulas(layer, formula):
    np.testing.assert_allclose(layer(tt.tensor(X)).data, formula(X), atol=1e-15)
    assert tt.gradcheck(lambda a: layer(a).sum(), _t(X))


def test_prelu_per_channel():
    m = nn.PReLU(3, dtype=np.float64)
    m.weight.data[:] = [0.1, 0.2, 0.3]
    x = -np.ones((2, 3, 2))
    np.testing.assert_allclose(m(tt.tensor(x)).data, x * np.array([0.1, 0.2, 0.3])[:, None])
    assert list(m.state_dict()) == ["weight"]


# ----- containers, shapes ------------------------------------------------------------------------
def test_parameter_list_and_dict_register_their_parameters():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.ps = nn.ParameterList([np.ones(2), np.zeros(3)])
            self.pd = nn.ParameterDict({"scale": np.ones(1)})

    m = M()
    assert [n for n, _ in m.named_parameters()] == ["lin.weight", "lin.bias", "ps.0", "ps.1", "pd.scale"]
    assert len(m.ps) == 2 and m.ps[1].shape == (3,) and "scale" in m.pd
    m.ps.append(np.ones(4))
    assert len(list(m.parameters())) == 6
    m.load_state_dict({k: np.zeros_like(v) for k, v in m.state_dict().items()})


def test_unflatten():
    assert nn.Unflatten(1, (2, 3))(tt.tensor(np.zeros((4, 6, 5)))).shape == (4, 2, 3, 5)
    with pytest.raises(ValueError, match="multiply"):
        nn.Unflatten(1, (4, 2))(tt.tensor(np.zeros((4, 6))))


# ----- the transformer layers: PyTorch's keys, its forward as a formula ---------------------------
ENC_KEYS = [
    "self_attn.in_proj_weight",
    "self_attn.in_proj_bias",
    "self_attn.out_proj.weight",
    "self_attn.out_proj.bias",
    "linear1.weight",
    "linear1.bias",
    "linear2.weight",
    "linear2.bias",
    "norm1.weight",
    "norm1.bias",
    "norm2.weight",
    "norm2.bias",
]


def _ln(x, w, b):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b


def _mha_ref(x, sd, p, H):
    """PyTorch's self-attention of (L, N, E) x, in NumPy."""
    L, N, E = x.shape
    q, k, v = np.split(x @ sd[p + "in_proj_weight"].T + sd[p + "in_proj_bias"], 3, axis=-1)
    heads = lambda t: t.reshape(L, N * H, E // H).transpose(1, 0, 2)  # noqa: E731
    s = heads(q) @ heads(k).transpose(0, 2, 1) / np.sqrt(E // H)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    out = (w @ heads(v)).transpose(1, 0, 2).reshape(L, N, E)
    return out @ sd[p + "out_proj.weight"].T + sd[p + "out_proj.bias"]


def _enc_ref(x, sd, H, norm_first):
    ff = lambda t: (
        np.maximum(t @ sd["linear1.weight"].T + sd["linear1.bias"], 0) @ sd["linear2.weight"].T
        + sd["linear2.bias"]
    )  # noqa: E731
    n1 = lambda t: _ln(t, sd["norm1.weight"], sd["norm1.bias"])  # noqa: E731
    n2 = lambda t: _ln(t, sd["norm2.weight"], sd["norm2.bias"])  # noqa: E731
    if norm_first:
        x = x + _mha_ref(n1(x), sd, "self_attn.", H)
        return x + ff(n2(x))
    x = n1(x + _mha_ref(x, sd, "self_attn.", H))
    return n2(x + ff(x))


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_is_pytorchs_forward_with_its_keys(norm_first):
    layer = nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.1, norm_first=norm_first, rng=0, dtype=np.float64
    )
    keys = lambda m: [k for k in m.state_dict() if not k.endswith("rng")]  # noqa: E731  (seeded dropouts)
    assert keys(layer) == ENC_KEYS
    sd = {k: R.normal(size=layer.state_dict()[k].shape) * 0.5 for k in ENC_KEYS}
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8, dtype=np.float64))
    assert keys(enc) == (
        [f"layers.0.{k}" for k in ENC_KEYS]
        + [f"layers.1.{k}" for k in ENC_KEYS]
        + ["norm.weight", "norm.bias"]
    )
    full = {f"layers.{i}.{k}": v * (1 + i) for i in range(2) for k, v in sd.items()}
    full.update({"norm.weight": np.full(8, 1.5), "norm.bias": np.full(8, 0.1)})
    enc.load_state_dict(full)
    enc.eval()
    x = R.normal(size=(5, 3, 8))
    want = x
    for i in range(2):
        want = _enc_ref(want, {k: v * (1 + i) for k, v in sd.items()}, 2, norm_first)
    want = _ln(want, 1.5, 0.1)
    np.testing.assert_allclose(enc(x).data, want, atol=1e-12)
    assert enc.layers[0].self_attn.in_proj_weight is not enc.layers[1].self_attn.in_proj_weight
    assert tt.gradcheck(lambda a: enc(a).sin().sum(), _t(x[:, :1]))


def test_transformer_decoder_layer_keys_and_shapes():
    dec = nn.TransformerDecoderLayer(8, 2, 16, batch_first=True, rng=0, dtype=np.float64)
    keys = [k for k in dec.state_dict() if not k.endswith("rng")]
    assert keys[:4] == [
        "self_attn.in_proj_weight",
        "self_attn.in_proj_bias",
        "self_attn.out_proj.weight",
        "self_attn.out_proj.bias",
    ]
    assert keys[4:8] == [
        "multihead_attn.in_proj_weight",
        "multihead_attn.in_proj_bias",
        "multihead_attn.out_proj.weight",
        "multihead_attn.out_proj.bias",
    ]
    assert keys[8:] == [
        "linear1.weight",
        "linear1.bias",
        "linear2.weight",
        "linear2.bias",
        "norm1.weight",
        "norm1.bias",
        "norm2.weight",
        "norm2.bias",
        "norm3.weight",
        "norm3.bias",
    ]
    dec.eval()
    tgt, mem = R.normal(size=(2, 4, 8)), R.normal(size=(2, 6, 8))
    mask = np.triu(np.ones((4, 4), bool), 1)
    out = dec(tgt, mem, tgt_mask=mask)
    assert out.shape == (2, 4, 8)
    # causal: the first position does not depend on later targets
    tgt2 = tgt.copy()
    tgt2[:, 3] += 1.0
    np.testing.assert_allclose(dec(tgt2, mem, tgt_mask=mask).data[:, 0], out.data[:, 0], atol=1e-13)


# ----- functional spellings ----------------------------------------------------------------------
def test_f_pad_takes_pytorchs_last_axis_first_pairs():
    x = R.normal(size=(2, 3, 4))
    np.testing.assert_array_equal(F.pad(tt.tensor(x), (1, 2)).data, np.pad(x, ((0, 0), (0, 0), (1, 2))))
    np.testing.assert_array_equal(
        F.pad(tt.tensor(x), (1, 2, 3, 0), value=7.0).data,
        np.pad(x, ((0, 0), (3, 0), (1, 2)), constant_values=7.0),
    )
    np.testing.assert_array_equal(
        F.pad(tt.tensor(x), (1, 1, 1, 1), mode="reflect").data,
        np.pad(x, ((0, 0), (1, 1), (1, 1)), mode="reflect"),
    )
    np.testing.assert_array_equal(
        F.pad(tt.tensor(x), (2, 0), mode="replicate").data, np.pad(x, ((0, 0), (0, 0), (2, 0)), mode="edge")
    )
    np.testing.assert_array_equal(
        F.pad(tt.tensor(x), (-1, 1)).data, np.pad(x[..., 1:], ((0, 0), (0, 0), (0, 1)))
    )
    np.testing.assert_array_equal(
        tt.pad(tt.tensor(x), ((1, 2), (0, 0), (0, 0))).data, np.pad(x, ((1, 2), (0, 0), (0, 0)))
    )  # tt.pad keeps NumPy's
    with pytest.raises(ValueError, match="even number"):
        F.pad(tt.tensor(x), (1, 2, 3))
    assert tt.gradcheck(lambda a: F.pad(a, (1, 2, 0, 1), mode="reflect").sin().sum(), _t(x[:1]))


def test_f_one_hot_normalize_layer_norm_embedding():
    np.testing.assert_array_equal(F.one_hot(tt.tensor([0, 2]), 4).data, [[1, 0, 0, 0], [0, 0, 1, 0]])
    assert F.one_hot(tt.tensor([0, 2])).dtype == np.int64 and F.one_hot(tt.tensor([0, 2])).shape == (2, 3)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        F.one_hot(tt.tensor([0, 3]), 3)
    with pytest.raises(TypeError, match="integer"):
        F.one_hot(tt.tensor([0.0, 1.0]))
    x = R.normal(size=(3, 4))
    np.testing.assert_allclose(F.normalize(tt.tensor(x)).data, x / np.linalg.norm(x, axis=1, keepdims=True))
    np.testing.assert_allclose(F.normalize(tt.tensor(x), p=1, dim=0).data, x / np.abs(x).sum(0))
    np.testing.assert_allclose(F.layer_norm(tt.tensor(x), (4,)).data, _ln(x, 1, 0), atol=1e-14)
    w = _t(R.normal(size=(5, 2)))
    out = F.embedding(np.array([1, 0, 1]), w, padding_idx=0)
    np.testing.assert_array_equal(out.data, w.data[[1, 0, 1]])
    out.sum().backward()
    np.testing.assert_array_equal(w.grad[:, 0], [0, 2, 0, 0, 0])


def test_compiled_embedding_padding_and_gather_read_each_calls_indices():
    w = R.normal(size=(5, 2))

    def loss(w_, idx):
        return (F.embedding(idx, w_, padding_idx=0) ** 2).sum() + w_.gather(0, idx[:2, None]).sum()

    compiled = tt.compile(tt.value_and_grad(loss))
    for idx in (np.array([0, 1, 2]), np.array([3, 0, 0]), np.array([4, 4, 1])):
        value, grad = compiled(w, idx)
        w_eager = _t(w)
        eager = loss(w_eager, idx)
        eager.backward()
        assert float(value) == eager.item()
        np.testing.assert_array_equal(grad, w_eager.grad)


def test_compiled_embedding_layer_masks_padding_rows_on_every_call():
    # traced first on indices without the padding index: the mask must still be computed per call
    emb = nn.Embedding(5, 2, padding_idx=0, rng=0, dtype=np.float64)
    loss = lambda w, idx: (nn.functional_call(emb, {"weight": w}, idx) * np.array([1.0, 2.0])).sum()  # noqa: E731
    compiled = tt.compile(tt.grad(loss))
    for idx in (np.array([1, 2]), np.array([0, 1]), np.array([0, 0])):
        got = compiled(emb.weight.data, idx)
        np.testing.assert_array_equal(got, tt.grad(loss)(emb.weight.data, idx))
        assert not got[0].any()


def test_transformer_decoder_stacks_copies_of_the_layer():
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, rng=0, dtype=np.float64)
    dec = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(8, dtype=np.float64))
    keys = [k for k in dec.state_dict() if not k.endswith("rng")]
    assert keys[0] == "layers.0.self_attn.in_proj_weight" and keys[-2:] == ["norm.weight", "norm.bias"]
    tgt, mem = R.normal(size=(4, 2, 8)), R.normal(size=(6, 2, 8))
    mask = np.triu(np.ones((4, 4), bool), 1)
    want = dec.norm(dec.layers[1](dec.layers[0](tgt, mem, tgt_mask=mask), mem, tgt_mask=mask))
    np.testing.assert_array_equal(dec(tgt, mem, tgt_mask=mask).data, want.data)
    np.testing.assert_array_equal(dec.layers[0].linear1.weight.data, layer.linear1.weight.data)


def test_transformer_is_encoder_then_decoder_with_pytorchs_keys():
    model = nn.Transformer(
        8,
        2,
        num_encoder_layers=2,
        num_decoder_layers=1,
        dim_feedforward=16,
        dropout=0.0,
        batch_first=True,
        rng=0,
        dtype=np.float64,
    )
    keys = [k for k in model.state_dict() if not k.endswith("rng")]
    assert keys[0] == "encoder.layers.0.self_attn.in_proj_weight"
    assert "encoder.norm.weight" in keys and "decoder.layers.0.multihead_attn.out_proj.bias" in keys
    assert keys[-2:] == ["decoder.norm.weight", "decoder.norm.bias"]
    mask = nn.Transformer.generate_square_subsequent_mask(3, np.float64)
    np.testing.assert_array_equal(mask, [[0, -np.inf, -np.inf], [0, 0, -np.inf], [0, 0, 0]])
    src, tgt = R.normal(size=(2, 5, 8)), R.normal(size=(2, 3, 8))
    out = model(src, tgt, tgt_mask=mask)
    want = model.decoder(tgt, model.encoder(src), tgt_mask=mask)
    np.testing.assert_array_equal(out.data, want.data)
    assert tt.gradcheck(lambda a: model(src[:1], a, tgt_mask=mask).sin().sum(), _t(tgt[:1]))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_padding_modes_pad_first_as_pytorch(mode):
    numpy_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    m = nn.Conv2d(2, 3, 3, padding=(1, 2), rng=0, dtype=np.float64, padding_mode=mode)
    x = R.normal(size=(1, 2, 5, 6))
    plain = nn.Conv2d(2, 3, 3, rng=0, dtype=np.float64)
    plain.load_state_dict(m.state_dict())
    want = plain(np.pad(x, ((0, 0), (0, 0), (1, 1), (2, 2)), mode=numpy_mode)).data
    np.testing.assert_allclose(m(x).data, want, atol=1e-13)
    c = nn.Conv1d(2, 3, 4, padding="same", padding_mode=mode, rng=0, dtype=np.float64)
    x1 = R.normal(size=(1, 2, 7))
    want1 = conv1d_ref(
        np.pad(x1, ((0, 0), (0, 0), (1, 2)), mode=numpy_mode), c.weight.data, c.bias.data, 1, 0, 1, 1
    )
    np.testing.assert_allclose(c(x1).data, want1, atol=1e-13)
    assert tt.gradcheck(lambda a: m(a).sin().sum(), _t(x))
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(2, 3, 3, padding_mode="mirror")


def _bicubic_ref(x, out_h, out_w, align):
    """PyTorch's upsample_bicubic2d, pixel by pixel: 4 x 4 taps (clamped), Keys' kernel with A = -0.75."""
    A = -0.75
    near = lambda t: ((A + 2) * t - (A + 3)) * t * t + 1  # noqa: E731
    far = lambda t: ((A * t - 5 * A) * t + 8 * A) * t - 4 * A  # noqa: E731
    H, W = x.shape[-2:]
    sh = ((H - 1) / (out_h - 1) if out_h > 1 else 0) if align else H / out_h
    sw = ((W - 1) / (out_w - 1) if out_w > 1 else 0) if align else W / out_w
    out = np.zeros(x.shape[:-2] + (out_h, out_w))
    for oy in range(out_h):
        fy = oy * sh if align else (oy + 0.5) * sh - 0.5
        iy, ty = int(np.floor(fy)), fy - np.floor(fy)
        wy = [far(ty + 1), near(ty), near(1 - ty), far(2 - ty)]
        for ox in range(out_w):
            fx = ox * sw if align else (ox + 0.5) * sw - 0.5
            ix, tx = int(np.floor(fx)), fx - np.floor(fx)
            wx = [far(tx + 1), near(tx), near(1 - tx), far(2 - tx)]
            for a in range(4):
                for b in range(4):
                    py, px = min(max(iy - 1 + a, 0), H - 1), min(max(ix - 1 + b, 0), W - 1)
                    out[..., oy, ox] += wy[a] * wx[b] * x[..., py, px]
    return out


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(8, 8), (7, 3), (3, 9)])
def test_bicubic_is_pytorchs_cubic_convolution(align, size):
    x = R.normal(size=(2, 2, 4, 5))
    got = F.interpolate(tt.tensor(x), size=size, mode="bicubic", align_corners=align).data
    np.testing.assert_allclose(got, _bicubic_ref(x, *size, align), atol=1e-12)
    assert tt.gradcheck(
        lambda a: F.interpolate(a, size=size, mode="bicubic", align_corners=align).sin().sum(), _t(x[:1, :1])
    )


def test_bicubic_keeps_a_constant_image():
    out = F.interpolate(tt.tensor(np.full((1, 1, 4, 5), 2.5)), size=(9, 7), mode="bicubic").data
    np.testing.assert_allclose(out, 2.5, atol=1e-14)  # Keys' weights sum to 1 at every fraction


@pytest.mark.parametrize(
    "kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, ceil_mode=True)]
)
def test_max_pool_indices_and_unpool(kw):
    x = R.normal(size=(2, 3, 5, 5))
    pool = nn.MaxPool2d(return_indices=True, **kw)
    out, index = pool(tt.tensor(x))
    assert index.dtype == np.int64 and index.shape == out.shape and not index.requires_grad
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(
        np.take_along_axis(flat, index.data.reshape(2, 3, -1), 2).reshape(out.shape), out.data
    )  # each index points at its maximum
    np.testing.assert_array_equal(out.data, nn.MaxPool2d(**kw)(tt.tensor(x)).data)
    unpool = nn.MaxUnpool2d(kw["kernel_size"], kw.get("stride"), kw.get("padding", 0))
    back = unpool(out, index, output_size=x.shape)
    want = np.zeros_like(flat)
    np.put_along_axis(want, index.data.reshape(2, 3, -1), out.data.reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(back.data, want.reshape(x.shape))
    a = _t(out.data)
    weights = R.normal(size=x.shape)
    (unpool(a, index, output_size=x.shape) * weights).sum().backward()
    # PyTorch's backward: each value gets the gradient at its index (repeated indices too)
    np.testing.assert_array_equal(
        a.grad,
        np.take_along_axis(weights.reshape(2, 3, -1), index.data.reshape(2, 3, -1), 2).reshape(out.shape),
    )
    if "stride" not in kw:  # windows that do not overlap: no index repeats, the true derivative
        assert tt.gradcheck(lambda a: unpool(a, index[:1], output_size=x.shape).sin().sum(), _t(out.data[:1]))
    single, single_index = pool(tt.tensor(x[0]))  # unbatched
    np.testing.assert_array_equal(single_index.data, index.data[0])
    with pytest.raises(ValueError, match="indices must lie"):
        F.max_unpool2d(out, index.data + 100, kw["kernel_size"], kw.get("stride"), output_size=(5, 5))


@pytest.mark.parametrize("out", [(3, 2), (1, 1), (5, 7)])
def test_adaptive_max_pool_indices_point_at_the_maxima(out):
    x = R.normal(size=(2, 3, 5, 7))
    values, index = nn.AdaptiveMaxPool2d(out, return_indices=True)(tt.tensor(x))
    assert index.dtype == np.int64 and index.shape == values.shape
    got = np.take_along_axis(x.reshape(2, 3, -1), index.data.reshape(2, 3, -1), 2).reshape(values.shape)
    np.testing.assert_array_equal(got, values.data)
    for i, (a, b) in enumerate(_bins(5, out[0])):  # each index inside its own bin
        for j, (c, d) in enumerate(_bins(7, out[1])):
            rows, cols = np.divmod(index.data[..., i, j], 7)
            assert np.all((a <= rows) & (rows < b) & (c <= cols) & (cols < d))
