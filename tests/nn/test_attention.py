"""Attention as PyTorch's (issue 23 item 2): F.scaled_dot_product_attention against the NumPy
formula, nn.MultiheadAttention against values PyTorch 2.13 computed for the same weights (stored
below, float64: forward, weights and gradients), and against torch itself when it is installed."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import functional as F

# torch.nn.MultiheadAttention(4, 2, dtype=float64) with these weights, (L, N, E) inputs,
# key_padding_mask[1, -2:] = True, attn_mask = strict upper triangle (True: may not attend);
# loss = out.sin().sum() + (weights ** 2).sum().
SD = {"in_proj_weight": np.array([[-0.35,  0.22, -0.48,  0.03],
     [-0.34,  0.07,  0.11,  0.22],
     [ 0.3 , -0.33,  0.38,  0.16],
     [-0.37, -0.43, -0.02,  0.51],
     [ 0.09, -0.02,  0.36, -0.16],
     [-0.28, -0.56,  0.3 , -0.19],
     [ 0.05, -0.04,  0.45, -0.56],
     [ 0.61,  0.46,  0.32, -0.3 ],
     [-0.38,  0.6 ,  0.34, -0.17],
     [ 0.08,  0.3 , -0.61,  0.1 ],
     [ 0.09, -0.55, -0.41,  0.61],
     [ 0.12, -0.43, -0.13,  0.45]]),
      "in_proj_bias": np.array([0.13, -0.13, 0.64, 0.1, -0.54, 0.36, 1.3, 0.95, -0.7, -1.27, -0.62,
                                0.04]),
      "out_proj.weight": np.array([[ 0.47,  0.21, -0.04,  0.42],
     [ 0.15,  0.29, -0.32, -0.15],
     [ 0.08, -0.21, -0.05, -0.32],
     [-0.14,  0.12, -0.02, -0.06]]),
      "out_proj.bias": np.array([-2.33, -0.22, -1.25, -0.73])}
Q = np.array([[[-0.54, -0.32,  0.41,  1.04],
      [-0.13,  1.37, -0.67,  0.35]],

     [[ 0.9 ,  0.09, -0.74, -0.92],
      [-0.46,  0.22, -1.01, -0.21]],

     [[-0.16,  0.54,  0.21,  0.36],
      [-0.65, -0.13,  0.78,  1.49]]])
K = np.array([[[-1.26,  1.51,  1.35,  0.78],
      [ 0.26, -0.31,  1.46,  1.96]],

     [[ 1.8 ,  1.32,  0.36, -1.21],
      [-0.  ,  0.66, -1.29,  0.4 ]],

     [[ 0.43,  0.7 , -1.18, -0.66],
      [-0.44, -1.17,  1.74, -0.5 ]],

     [[ 0.33, -0.26,  1.58,  1.32],
      [ 0.63, -2.2 ,  0.05,  0.68]],

     [[ 1.  , -0.62,  1.82, -1.32],
      [-0.66,  0.94,  0.05,  2.  ]]])
V = np.array([[[ 0.19, -0.63, -0.38, -1.09],
      [-1.28,  0.63,  0.58,  1.29]],

     [[-0.75,  1.69, -0.29,  1.57],
      [-0.43, -0.74,  0.25,  1.03]],

     [[ 0.16, -0.59, -1.34, -1.4 ],
      [ 0.5 ,  0.99, -0.16, -1.07]],

     [[ 0.87, -1.28, -0.71,  0.62],
      [-2.25,  0.39, -0.58,  0.11]],

     [[-0.08,  0.2 ,  0.69, -0.76],
      [ 1.42,  0.73,  0.84,  1.16]]])
OUT = np.array([[[-3.136125      , -0.506135      , -0.987475      , -0.713592      ],
      [-2.486885      , -0.454691      , -0.954856      , -0.91549       ]],

     [[-2.657638701985, -0.272106571786, -1.038886160779, -0.767186377714],
      [-2.621192318993, -0.723171051232, -1.098306810939, -0.88080899497 ]],

     [[-2.853640425079, -0.365774036887, -1.06925337943 , -0.716411849421],
      [-2.8226462455  , -0.185556408692, -0.837184248964, -0.793556061328]]])
W = np.array([[[1.            , 0.            , 0.            , 0.            , 0.            ],
      [0.548992011385, 0.451007988615, 0.            , 0.            , 0.            ],
      [0.312557162583, 0.39992327962 , 0.287519557798, 0.            , 0.            ]],

     [[1.            , 0.            , 0.            , 0.            , 0.            ],
      [0.547311045558, 0.452688954442, 0.            , 0.            , 0.            ],
      [0.261790555672, 0.1807594488  , 0.557449995528, 0.            , 0.            ]]])
GQ = np.array([[[ 0.            ,  0.            ,  0.            ,  0.            ],
      [ 0.            ,  0.            ,  0.            ,  0.            ]],

     [[ 0.005625637807,  0.038604659314,  0.006217868338, -0.028482076433],
      [ 0.043745485743, -0.036915115316,  0.033903674249,  0.002499061125]],

     [[ 0.007148074922, -0.00443615518 ,  0.020452474687,  0.001262913979],
      [ 0.117652971789, -0.165697148421,  0.185921933323,  0.101913963205]]])
GIN = np.array([[-1.238794328022e-03, -3.359612306133e-02,  6.199783290342e-02,  3.553931803415e-02],
     [ 3.788444079993e-02, -1.735569497075e-03,  6.011306753632e-02,  4.556123670941e-02],
     [-3.698525739618e-01, -5.581421442662e-02,  3.543606343574e-01,  7.511197666239e-01],
     [-8.304035399840e-02, -8.353827078423e-03,  5.201622885631e-02,  9.160068120070e-02],
     [-8.015408578188e-02,  4.184565547579e-02, -1.208235008156e-01, -2.934135956978e-02],
     [ 1.532687500365e-01, -3.513510190640e-02, -4.885379749954e-02, -1.687539055224e-01],
     [-2.121606569167e-01, -4.089938222068e-01,  5.703715257760e-01, -4.118359723584e-01],
     [-1.008430122483e-01, -4.749665542206e-01,  6.142866848284e-01, -5.323629946746e-01],
     [ 8.651799020533e-01, -4.346469447425e-01,  1.353053423497e-01, -4.308030614682e-01],
     [-1.125710443305e-01,  9.796414042453e-02, -3.098326287447e-02,  8.044429048526e-02],
     [ 6.437016668991e-01, -3.707632082277e-01,  1.038412097668e-01, -1.994701742268e-01],
     [ 1.571669755253e+00, -8.351943972867e-01,  2.661195571762e-01, -4.439254077882e-01]])


def np_softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_sdpa_is_the_formula_with_masks_and_causal():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s) for s in ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5)))
    out = F.scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(out.data, np_softmax(q @ k.swapaxes(-1, -2) / np.sqrt(8)) @ v, rtol=1e-12)
    mask = rng.random((4, 6)) > 0.3
    mask[:, 0] = True
    ref = np_softmax(np.where(mask, q @ k.swapaxes(-1, -2) * 0.5, -np.inf)) @ v
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.5).data, ref,
                               rtol=1e-12)
    bias = rng.standard_normal((4, 6))
    ref = np_softmax(q @ k.swapaxes(-1, -2) / np.sqrt(8) + bias) @ v
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=bias).data, ref, rtol=1e-12)
    causal = F.scaled_dot_product_attention(q, k[..., :4, :], v[..., :4, :], is_causal=True)
    tri = np.tril(np.ones((4, 4), bool))
    ref = np_softmax(np.where(tri, q @ k[..., :4, :].swapaxes(-1, -2) / np.sqrt(8), -np.inf)) @ v[..., :4, :]
    np.testing.assert_allclose(causal.data, ref, rtol=1e-12)
    with pytest.raises(ValueError, match="share E"):
        F.scaled_dot_product_attention(q, k[..., :7], v)


def test_sdpa_gradients_match_finite_differences_and_float32_stays():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(s) for s in ((3, 4), (5, 4), (5, 2)))
    mask = np.tril(np.ones((3, 5), bool))
    sdpa = F.scaled_dot_product_attention
    assert tt.gradcheck(lambda a, b, c: sdpa(a, b, c, attn_mask=mask), q, k, v)
    out = sdpa(*(tt.tensor(a.astype(np.float32)) for a in (q, k, v)), is_causal=True)
    assert out.dtype == np.float32
    tt.manual_seed(0)
    dropped = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert dropped.shape == (3, 2)


def test_multihead_attention_equals_pytorch_forward_and_gradients():
    mha = nn.MultiheadAttention(4, 2, dtype=np.float64)
    assert [name for name, _ in mha.named_parameters()] == ["in_proj_weight", "in_proj_bias",
                                                             "out_proj.weight", "out_proj.bias"]
    mha.load_state_dict(SD)
    kpm = np.zeros((2, 5), bool)
    kpm[1, -2:] = True
    am = np.triu(np.ones((3, 5), bool), 1)
    q = tt.tensor(Q, requires_grad=True)
    out, w = mha(q, K, V, key_padding_mask=kpm, attn_mask=am)
    np.testing.assert_allclose(out.data, OUT, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.data, W, rtol=1e-10, atol=1e-12)
    (tt.sum(tt.sin(out)) + tt.sum(w * w)).backward()
    np.testing.assert_allclose(q.grad, GQ, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mha.in_proj_weight.grad, GIN, rtol=1e-9, atol=1e-12)


def test_multihead_attention_layouts_and_options():
    mha = nn.MultiheadAttention(8, 4, batch_first=True, rng=0)
    assert mha.in_proj_weight.shape == (24, 8) and mha.out_proj.weight.shape == (8, 8)
    assert np.all(mha.in_proj_bias.data == 0) and np.all(mha.out_proj.bias.data == 0)
    bound = np.sqrt(6 / (24 + 8))                    # xavier_uniform_ on (3E, E), as PyTorch
    assert np.abs(mha.in_proj_weight.data).max() <= bound
    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
    out, w = mha(x, x, x)
    assert out.shape == (2, 5, 8) and w.shape == (2, 5, 5) and out.dtype == np.float32
    out, w = mha(x, x, x, average_attn_weights=False)
    assert w.shape == (2, 4, 5, 5)
    out1, none = mha(x[0], x[0], x[0], need_weights=False)        # unbatched (L, E)
    assert none is None
    np.testing.assert_allclose(out1.data, out.data[0], rtol=1e-5)
    causal, w = mha(x, x, x, is_causal=True)
    assert np.all(np.triu(w.data[0], 1) == 0)
    with pytest.raises(ValueError, match="multiple"):
        nn.MultiheadAttention(6, 4)
    no_bias = nn.MultiheadAttention(8, 2, bias=False)
    assert [n for n, _ in no_bias.named_parameters()] == ["in_proj_weight", "out_proj.weight"]


def test_multihead_attention_against_torch_when_installed():
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    ref = torch.nn.MultiheadAttention(6, 3, batch_first=True, dtype=torch.float64)
    mha = nn.MultiheadAttention(6, 3, batch_first=True, dtype=np.float64)
    mha.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    x = np.random.default_rng(4).standard_normal((2, 4, 6))
    tx = torch.tensor(x, requires_grad=True)
    o, w = ref(tx, tx, tx, average_attn_weights=False)
    (o.square().sum() + w.sum()).backward()
    t = tt.tensor(x, requires_grad=True)
    o2, w2 = mha(t, t, t, average_attn_weights=False)
    (tt.sum(o2 * o2) + tt.sum(w2)).backward()
    np.testing.assert_allclose(o2.data, o.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(t.grad, tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mha.out_proj.weight.grad, ref.out_proj.weight.grad.numpy(), rtol=1e-9)
