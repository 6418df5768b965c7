"""Attention, as PyTorch's: `F.scaled_dot_product_attention` and `nn.MultiheadAttention`.

Both are composed from primitives (matmul, softmax, where, getitem, reshape, transpose), so both
modes and every order of derivative come from their rules; the parameters have PyTorch's names and
layouts (`in_proj_weight` (3 E, E), `in_proj_bias`, `out_proj.weight`, `out_proj.bias`), so a
PyTorch state dict as arrays loads with `load_state_dict` and gives PyTorch's outputs.

Masks follow PyTorch, whose two functions disagree: for `scaled_dot_product_attention` a boolean
`attn_mask` is True where a query MAY attend; for `MultiheadAttention` a boolean `attn_mask` or
`key_padding_mask` is True where it may NOT. A float mask is added to the scores in both.
"""

import math

import numpy as np

from .. import backend, ops
from ..rng import generator
from ..tensor import Tensor
from . import functional as F
from . import init
from .layers import Linear
from .module import Module, cast_input


def _array(x):
    return x.data if isinstance(x, Tensor) else backend.asarray(x)


def _batch_of_one(mask):
    """An unbatched mask (S,) as (1, S); a Tensor through the tape's reshape (tt.compile sees it)."""
    if isinstance(mask, Tensor):
        return ops.reshape(mask, (1,) + tuple(mask.shape))
    return _array(mask)[None]


def _dropout(p, x, rng):
    """x * mask / (1 - p), the mask drawn from `rng` (None: the global generator) through
    draws.draw, so tt.compile draws a fresh mask on every call as eagerly."""
    return F._dropout(x, p, rng)[0]


def _masked(scores, mask, allowed, name):
    """scores with `mask` applied: a boolean mask (True = `allowed` to attend) puts -inf where
    attending is not allowed; a float mask is added."""
    m = mask if isinstance(mask, Tensor) else backend.asarray(mask)   # a Tensor stays one: tt.compile
    if m.dtype == np.bool_:                                           # records what is done with it
        ninf = np.array(-np.inf, scores.dtype)
        return ops.PUBLIC["where"](m, scores, ninf) if allowed else ops.PUBLIC["where"](m, ninf, scores)
    if m.dtype.kind != "f":
        raise TypeError(f"{name}: a mask must be boolean or floating, got dtype {m.dtype}")
    return scores + (m if isinstance(m, Tensor) else m.astype(scores.dtype, copy=False))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, rng=None):
    """softmax(query @ key^T * scale + mask) @ value, as torch.nn.functional's.

    query (..., L, E), key (..., S, E), value (..., S, Ev) give (..., L, Ev). `scale` defaults to
    1 / sqrt(E). `attn_mask`: boolean (True: may attend) or float (added), broadcast to (..., L, S).
    `is_causal`: query i attends to keys 0..i (the lower triangle, as PyTorch's; not together with
    attn_mask). `dropout_p` drops attention weights (always, as PyTorch's functional form: pass 0.0
    in evaluation); its mask comes from `rng` (None: the global generator, tt.manual_seed)."""
    q, k = query, key
    shape_q, shape_k = np.shape(_array(q)), np.shape(_array(k))
    if len(shape_q) < 2 or len(shape_k) < 2 or shape_q[-1] != shape_k[-1]:
        raise ValueError(f"scaled_dot_product_attention: query (..., L, E) and key (..., S, E) must "
                         f"share E, got shapes {tuple(shape_q)} and {tuple(shape_k)}")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal=True, not both")
    scale = 1.0 / math.sqrt(shape_q[-1]) if scale is None else float(scale)
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) * scale
    if is_causal:
        attn_mask = np.tril(np.ones((shape_q[-2], shape_k[-2]), dtype=bool))
    if attn_mask is not None:
        scores = _masked(scores, attn_mask, True, "scaled_dot_product_attention")
    weights = ops.softmax(scores, axis=-1)
    if dropout_p > 0.0:
        weights = _dropout(float(dropout_p), weights, rng)
    return ops.matmul(weights, value)


class MultiheadAttention(Module):
    """PyTorch's nn.MultiheadAttention: `num_heads` heads of size embed_dim // num_heads.

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) returns (output, weights): output (L, N, E), or
    (N, L, E) with batch_first=True, or (L, E) unbatched; weights (N, L, S) averaged over the heads
    (or (N, num_heads, L, S)), None with need_weights=False. Masks: True where a query may NOT
    attend (key_padding_mask (N, S); attn_mask (L, S) or (N * num_heads, L, S)), or floats added.
    Parameters as PyTorch's: in_proj_weight (3 E, E) (xavier uniform), in_proj_bias (zeros),
    out_proj (a Linear, its bias zeros). Dropout (p=`dropout`) acts on the attention weights in
    training mode only.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False, rng=None,
                 dtype=np.float32):
        super().__init__()
        embed_dim, num_heads = int(embed_dim), int(num_heads)
        if embed_dim < 1 or num_heads < 1 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be a positive multiple "
                             f"of num_heads ({num_heads})")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        rng = generator(rng)
        self.in_proj_weight = Tensor(np.zeros((3 * embed_dim, embed_dim)), dtype=dtype,
                                     requires_grad=True, name="in_proj_weight")
        init.xavier_uniform_(self.in_proj_weight, rng=rng)
        self.in_proj_bias = (Tensor(np.zeros(3 * embed_dim), dtype=dtype, requires_grad=True,
                                    name="in_proj_bias") if bias else None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, rng=rng, dtype=dtype)
        if bias:
            init.zeros_(self.out_proj.bias)
        self.rng = rng

    def _project(self, x, i):
        E = self.embed_dim
        w = self.in_proj_weight[i * E:(i + 1) * E]
        b = None if self.in_proj_bias is None else self.in_proj_bias[i * E:(i + 1) * E]
        y = ops.matmul(x, ops.transpose(w))
        return y if b is None else y + b

    def _heads(self, x, n):      # (N, L, E) -> (N, H, L, hd)
        return ops.transpose(ops.reshape(x, (n, -1, self.num_heads, self.head_dim)), (0, 2, 1, 3))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        dtype = self.in_proj_weight.data.dtype
        query, key, value = (cast_input(t, dtype) for t in (query, key, value))
        unbatched = len(query.shape) == 2
        if unbatched:
            query, key, value = (ops.reshape(t, (1,) + tuple(t.shape)) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = _batch_of_one(key_padding_mask)
        elif not self.batch_first:                # (L, N, E) -> (N, L, E)
            query, key, value = (ops.swapaxes(t, 0, 1) for t in (query, key, value))
        n, L, E = query.shape
        S = key.shape[1]
        if E != self.embed_dim or key.shape[-1] != E or value.shape[-1] != E:
            raise ValueError(f"MultiheadAttention: expected embed_dim {self.embed_dim} on the last axis, "
                             f"got query {tuple(query.shape)}, key {tuple(key.shape)}, value "
                             f"{tuple(value.shape)}")
        q, k, v = (self._heads(self._project(t, i), n) for i, t in enumerate((query, key, value)))
        scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(self.head_dim))
        if is_causal and attn_mask is None:
            attn_mask = ~np.tril(np.ones((L, S), dtype=bool))
        if attn_mask is not None:
            m = attn_mask if isinstance(attn_mask, Tensor) else _array(attn_mask)
            if len(m.shape) == 3:                 # (N * H, L, S) -> (N, H, L, S)
                m = ops.reshape(m, (n, self.num_heads, L, S)) if isinstance(m, Tensor) \
                    else m.reshape(n, self.num_heads, L, S)
            scores = _masked(scores, m, False, "MultiheadAttention")
        if key_padding_mask is not None:
            m = key_padding_mask if isinstance(key_padding_mask, Tensor) else _array(key_padding_mask)
            if tuple(m.shape) != (n, S):
                raise ValueError(f"MultiheadAttention: key_padding_mask must be (N, S) = {(n, S)}, got "
                                 f"{tuple(m.shape)}")
            m = ops.reshape(m, (n, 1, 1, S)) if isinstance(m, Tensor) else m.reshape(n, 1, 1, S)
            scores = _masked(scores, m if m.dtype == np.bool_ else m.astype(dtype), False,
                             "MultiheadAttention")
        weights = ops.softmax(scores, axis=-1)
        if self.training and self.dropout > 0.0:
            weights = _dropout(self.dropout, weights, self.rng)
        out = ops.matmul(weights, v)                                   # (N, H, L, hd)
        out = ops.reshape(ops.transpose(out, (0, 2, 1, 3)), (n, L, E))
        out = self.out_proj(out)
        if unbatched:
            out = ops.reshape(out, (L, E))
        elif not self.batch_first:
            out = ops.swapaxes(out, 0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = ops.mean(weights, axis=1)
        if unbatched:
            weights = weights[0]
        return out, weights

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
                f"batch_first={self.batch_first}")
