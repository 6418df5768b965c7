"""MultiheadAttention's input checks as PyTorch's (an integer mask, a batch that differs between
query and key, wrong mask shapes: clear errors naming the argument), and kdim/vdim, add_bias_kv and
add_zero_attn against PyTorch's algorithm (F.multi_head_attention_forward) written in NumPy."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def reference(q, k, v, sd, H, kpm=None, am=None):
    """PyTorch's multi_head_attention_forward on (L, N, E) inputs, in NumPy."""
    L, N, E = q.shape
    hd = E // H
    if "in_proj_weight" in sd:
        Wq, Wk, Wv = np.split(sd["in_proj_weight"], 3)
    else:
        Wq, Wk, Wv = sd["q_proj_weight"], sd["k_proj_weight"], sd["v_proj_weight"]
    bq, bk, bv = np.split(sd["in_proj_bias"], 3)
    Q, K, V = q @ Wq.T + bq, k @ Wk.T + bk, v @ Wv.T + bv
    am = None if am is None else np.where(am, -np.inf, 0.0) if am.dtype == bool else am
    kpm = None if kpm is None else np.where(kpm, -np.inf, 0.0) if kpm.dtype == bool else kpm
    if "bias_k" in sd:
        K = np.concatenate([K, np.repeat(sd["bias_k"], N, axis=1)])
        V = np.concatenate([V, np.repeat(sd["bias_v"], N, axis=1)])
        am = None if am is None else np.pad(am, [(0, 0)] * (am.ndim - 1) + [(0, 1)])
        kpm = None if kpm is None else np.pad(kpm, [(0, 0), (0, 1)])
    S = K.shape[0]
    Q = Q.reshape(L, N * H, hd).transpose(1, 0, 2)
    K = K.reshape(S, N * H, hd).transpose(1, 0, 2)
    V = V.reshape(S, N * H, hd).transpose(1, 0, 2)
    if sd.get("zero_attn"):
        K = np.concatenate([K, np.zeros((N * H, 1, hd))], 1)
        V = np.concatenate([V, np.zeros((N * H, 1, hd))], 1)
        am = None if am is None else np.pad(am, [(0, 0)] * (am.ndim - 1) + [(0, 1)])
        kpm = None if kpm is None else np.pad(kpm, [(0, 0), (0, 1)])
        S += 1
    scores = Q @ K.transpose(0, 2, 1) / np.sqrt(hd)
    if am is not None:
        scores = scores + am
    if kpm is not None:
        scores = (scores.reshape(N, H, L, S) + kpm[:, None, None, :]).reshape(N * H, L, S)
    w = _softmax(scores)
    out = (w @ V).transpose(1, 0, 2).reshape(L, N, E)
    out = out @ sd["out_proj.weight"].T + sd["out_proj.bias"]
    return out, w.reshape(N, H, L, S).mean(1)


def _mha(**kw):
    return nn.MultiheadAttention(8, 2, rng=0, dtype=np.float64, **kw)


def _inputs(L=3, S=5, N=2, E=8, kdim=8, vdim=8, seed=1):
    r = np.random.default_rng(seed)
    return r.normal(size=(L, N, E)), r.normal(size=(S, N, kdim)), r.normal(size=(S, N, vdim))


def test_integer_key_padding_mask_is_refused():
    q, k, v = _inputs()
    with pytest.raises(TypeError, match="key_padding_mask.*int64.*bool"):
        _mha()(q, k, v, key_padding_mask=np.array([[0, 0, 0, 1, 1], [0] * 5]))


def test_integer_attn_mask_is_refused():
    q, k, v = _inputs()
    with pytest.raises(TypeError, match="attn_mask"):
        _mha()(q, k, v, attn_mask=np.zeros((3, 5), np.int64))


def test_batch_sizes_must_agree():
    q, k, v = _inputs()
    with pytest.raises(ValueError, match="batch size 3 differs from query's 2"):
        _mha()(q, np.zeros((5, 3, 8)), np.zeros((5, 3, 8)))
    with pytest.raises(ValueError, match="key .* and value .* must agree"):
        _mha()(q, k, np.zeros((4, 2, 8)))
    with pytest.raises(ValueError, match="all be batched"):
        _mha()(q, k[:, 0], v[:, 0])


def test_mask_shapes_are_checked():
    q, k, v = _inputs()
    with pytest.raises(ValueError, match=r"key_padding_mask must be \(N, S\) = \(2, 5\)"):
        _mha()(q, k, v, key_padding_mask=np.zeros((5, 2), bool))
    with pytest.raises(ValueError, match=r"attn_mask must be \(L, S\) = \(3, 5\)"):
        _mha()(q, k, v, attn_mask=np.zeros((5, 3), bool))


def _sd(m):
    return {n: a for n, a in m.state_dict().items()}


@pytest.mark.parametrize("kw", [{}, {"kdim": 6, "vdim": 5}, {"add_bias_kv": True}, {"add_zero_attn": True},
                                {"kdim": 6, "add_bias_kv": True, "add_zero_attn": True}])
def test_options_equal_pytorchs_algorithm(kw):
    m = _mha(**kw)
    q, k, v = _inputs(kdim=kw.get("kdim", 8), vdim=kw.get("vdim", 8))
    kpm = np.zeros((2, 5), bool)
    kpm[1, -2:] = True
    am = np.triu(np.ones((3, 5), bool), 1)
    sd = _sd(m)
    sd["zero_attn"] = kw.get("add_zero_attn", False)
    out, w = m(q, k, v, key_padding_mask=kpm, attn_mask=am)
    want_out, want_w = reference(q, k, v, sd, 2, kpm, am)
    np.testing.assert_allclose(out.data, want_out, atol=1e-12)
    np.testing.assert_allclose(w.data, want_w, atol=1e-12)
    assert tt.gradcheck(lambda a: m(a, k, v, key_padding_mask=kpm)[0].sin().sum(), q)


def test_state_dict_keys_as_pytorchs():
    keys = lambda m: [k for k in m.state_dict() if k != "rng"]     # noqa: E731  (its generator)
    assert keys(_mha(kdim=6, vdim=5, add_bias_kv=True)) == [
        "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "bias_k", "bias_v",
        "out_proj.weight", "out_proj.bias"]
    assert keys(_mha()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    m, src = _mha(kdim=6, vdim=5, add_bias_kv=True), _mha(kdim=6, vdim=5, add_bias_kv=True)
    for p in src.parameters():
        p.data[...] = np.random.default_rng(3).normal(size=p.shape)
    m.load_state_dict(src.state_dict())
    q, k, v = _inputs(kdim=6, vdim=5)
    np.testing.assert_array_equal(m(q, k, v)[0].data, src(q, k, v)[0].data)


def test_compiled_attention_reads_each_calls_masks():
    m = nn.MultiheadAttention(8, 2, rng=0, dtype=np.float64, add_bias_kv=True)
    f = lambda q, kpm, am: m(q, q, q, key_padding_mask=kpm, attn_mask=am)[0].sum()   # noqa: E731
    compiled = tt.compile(f)
    r = np.random.default_rng(0)
    for _ in range(3):
        q, am = r.normal(size=(5, 2, 8)), r.normal(size=(5, 5))
        kpm = r.uniform(size=(2, 5)) < 0.3
        kpm[:, 0] = False
        assert compiled(q, kpm, am).item() == f(q, kpm, am).item()
