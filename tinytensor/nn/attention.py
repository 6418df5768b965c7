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
from ..ops.batching import BatchArray
from ..rng import generator
from ..state import SHARED, STATE
from ..tensor import Tensor
from ..torch_interop import host_array
from . import functional as F
from . import init
from .layers import Linear
from .module import Module, cast_input


def _array(x):
    return x.data if isinstance(x, Tensor) else backend.asarray(x)


def _recorded(mask):
    """A mask given as an array, as a Tensor while tt.compile records (a recorded copy: a mask
    kept and refilled in place is read anew on every call); as it is otherwise."""
    if mask is None or isinstance(mask, (Tensor, BatchArray)) or SHARED.quiet or STATE.recorder is None:
        return mask              # (a mask batched by tt.vmap: its rules batch it, as eagerly)
    return Tensor(_array(mask))


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
    m = mask if isinstance(mask, Tensor) else _array(mask)    # a Tensor stays one: tt ops see it
    inf = scores.dtype.type(-np.inf)     # (no np.array call: a traced mask here stays traced)
    if m.dtype == np.bool_:
        where = ops.PUBLIC["where"]
        return where(m, scores, inf) if allowed else where(m, inf, scores)
    if m.dtype.kind != "f":
        raise TypeError(f"{name}: a mask must be boolean or floating, got dtype {m.dtype}; for a 0/1 "
                        f"integer mask pass mask.bool()")
    return scores + (m if isinstance(m, Tensor) else m.astype(scores.dtype, copy=False))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, rng=None):
    """softmax(query @ key^T * scale + mask) @ value, as torch.nn.functional's.

    query (..., L, E), key (..., S, E), value (..., S, Ev) give (..., L, Ev). `scale` defaults to
    1 / sqrt(E). `attn_mask`: boolean (True: may attend) or float (added), broadcast to (..., L, S).
    `is_causal`: query i attends to keys 0..i (the lower triangle, as PyTorch's; not together with
    attn_mask). `dropout_p` drops attention weights (always, as PyTorch's functional form: pass 0.0
    in evaluation); its mask comes from `rng` (None: the global generator, tt.manual_seed).

    Examples
    --------
    >>> q = k = v = tt.tensor(np.arange(12.0).reshape(1, 3, 4))
    >>> F = tt.nn.functional
    >>> F.scaled_dot_product_attention(q, k, v).shape
    (1, 3, 4)
    >>> out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    >>> out.numpy()[0, 0]   # the first query attends only to the first key
    array([0., 1., 2., 3.])
    """
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


def _mask(mask, name, what, like):
    """A mask as a Tensor, checked as PyTorch checks it: boolean or floating (an integer 0/1 mask
    is refused: added as a bias it would silently shift the scores); a float mask in `like`'s dtype."""
    # the caller's array itself (never a copy), so tt.compile sees it as the argument it is
    m = mask if isinstance(mask, Tensor) else _array(host_array(mask))
    kind = m.dtype.kind
    if kind == "b":
        return m
    if kind != "f":
        raise TypeError(f"{name}: {what} must be boolean (True: may not attend) or floating (added to "
                        f"the scores), got dtype {m.dtype}; for a 0/1 integer mask pass mask.bool()")
    return m if m.dtype == like else ops.astype(m, like)


def _pad_column(m):
    """m (..., S) with one more column that masks nothing (False, or 0.0): for bias_k/bias_v and
    add_zero_attn, as PyTorch pads its masks."""
    return ops.concatenate([m, np.zeros(tuple(m.shape[:-1]) + (1,), m.dtype)], axis=-1)


class MultiheadAttention(Module):
    """PyTorch's nn.MultiheadAttention: `num_heads` heads of size embed_dim // num_heads.

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) returns (output, weights): output (L, N, E), or
    (N, L, E) with batch_first=True, or (L, E) unbatched; weights (N, L, S) averaged over the heads
    (or (N, num_heads, L, S)), None with need_weights=False. Masks: True where a query may NOT
    attend (key_padding_mask (N, S); attn_mask (L, S) or (N * num_heads, L, S)), or floats added;
    integer masks are refused, as PyTorch's. Parameters as PyTorch's: in_proj_weight (3 E, E)
    (xavier uniform), or q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim)
    when kdim or vdim differs from embed_dim; in_proj_bias (zeros), bias_k and bias_v (1, 1, E)
    with add_bias_kv (xavier normal: one more key and value, appended), out_proj (a Linear, its
    bias zeros). add_zero_attn appends a zero key and value per head. Dropout (p=`dropout`) acts on
    the attention weights in training mode only.

    Examples
    --------
    >>> mha = tt.nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True, rng=0)
    >>> x = tt.randn(2, 5, 8, rng=0)        # (batch, sequence, embed_dim)
    >>> out, weights = mha(x, x, x)         # self-attention
    >>> out.shape, weights.shape            # weights averaged over the heads
    ((2, 5, 8), (2, 5, 5))
    >>> weights.numpy().sum(axis=-1).round(6)   # each query's weights sum to 1
    array([[1., 1., 1., 1., 1.],
           [1., 1., 1., 1., 1.]], dtype=float32)
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False, rng=None,
                 dtype=np.float32, add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None):
        super().__init__()
        embed_dim, num_heads = int(embed_dim), int(num_heads)
        if embed_dim < 1 or num_heads < 1 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be a positive multiple "
                             f"of num_heads ({num_heads})")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else int(kdim)
        self.vdim = embed_dim if vdim is None else int(vdim)
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        self.add_zero_attn = bool(add_zero_attn)
        rng = generator(rng)

        def weight(shape, name):
            w = Tensor(np.zeros(shape), dtype=dtype, requires_grad=True, name=name)
            init.xavier_uniform_(w, rng=rng)
            return w
        if self._qkv_same_embed_dim:
            self.in_proj_weight = weight((3 * embed_dim, embed_dim), "in_proj_weight")
        else:
            self.in_proj_weight = None
            self.q_proj_weight = weight((embed_dim, embed_dim), "q_proj_weight")
            self.k_proj_weight = weight((embed_dim, self.kdim), "k_proj_weight")
            self.v_proj_weight = weight((embed_dim, self.vdim), "v_proj_weight")
        self.in_proj_bias = (Tensor(np.zeros(3 * embed_dim), dtype=dtype, requires_grad=True,
                                    name="in_proj_bias") if bias else None)
        self.bias_k = self.bias_v = None
        if add_bias_kv:
            self.bias_k = Tensor(np.zeros((1, 1, embed_dim)), dtype=dtype, requires_grad=True, name="bias_k")
            self.bias_v = Tensor(np.zeros((1, 1, embed_dim)), dtype=dtype, requires_grad=True, name="bias_v")
            init.xavier_normal_(self.bias_k, rng=rng)
            init.xavier_normal_(self.bias_v, rng=rng)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, rng=rng, dtype=dtype)
        if bias:
            init.zeros_(self.out_proj.bias)
        self.rng = rng

    def _project(self, x, i):
        E = self.embed_dim
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight[i * E:(i + 1) * E]
        else:
            w = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)[i]
        b = None if self.in_proj_bias is None else self.in_proj_bias[i * E:(i + 1) * E]
        y = ops.matmul(x, ops.transpose(w))
        return y if b is None else y + b

    def _heads(self, x, n):      # (N, L, E) -> (N, H, L, hd)
        return ops.transpose(ops.reshape(x, (n, -1, self.num_heads, self.head_dim)), (0, 2, 1, 3))

    def _check(self, query, key, value, unbatched):
        name = "MultiheadAttention"
        q, k, v = (tuple(t.shape) for t in (query, key, value))
        if len(q) not in (2, 3):
            layout = "(N, L, E)" if self.batch_first else "(L, N, E)"
            raise ValueError(f"{name}: query must be batched {layout} or unbatched (L, E), got shape {q}")
        if len(k) != len(q) or len(v) != len(q):
            raise ValueError(f"{name}: query, key and value must all be batched (3 axes) or all "
                             f"unbatched (2), got shapes {q}, {k} and {v}")
        if q[-1] != self.embed_dim:
            raise ValueError(f"{name}: query's last axis must be embed_dim={self.embed_dim}, got shape {q}")
        if k[-1] != self.kdim or v[-1] != self.vdim:
            raise ValueError(f"{name}: key's last axis must be kdim={self.kdim} and value's "
                             f"vdim={self.vdim}, got key {k} and value {v}")
        if k[:-1] != v[:-1]:
            raise ValueError(f"{name}: key {k} and value {v} must agree on every axis but the last "
                             f"(the source length and the batch)")
        if not unbatched:
            b = 0 if self.batch_first else 1
            if k[b] != q[b]:
                raise ValueError(f"{name}: key's batch size {k[b]} differs from query's {q[b]} "
                                 f"(shapes {k} and {q}, batch on axis {b}"
                                 f"{'' if self.batch_first else '; pass batch_first=True for (N, L, E)'})")

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        key_padding_mask, attn_mask = _recorded(key_padding_mask), _recorded(attn_mask)
        name = "MultiheadAttention"
        dtype = self.out_proj.weight.dtype
        query, key, value = (cast_input(t, dtype) for t in (query, key, value))
        unbatched = len(query.shape) == 2
        self._check(query, key, value, unbatched)
        if key_padding_mask is not None:
            key_padding_mask = _mask(key_padding_mask, name, "key_padding_mask", dtype)
        if attn_mask is not None:
            attn_mask = _mask(attn_mask, name, "attn_mask", dtype)
        if unbatched:
            query, key, value = (ops.reshape(t, (1,) + tuple(t.shape)) for t in (query, key, value))
            if key_padding_mask is not None:
                if len(key_padding_mask.shape) != 1:
                    raise ValueError(f"{name}: for unbatched input key_padding_mask must be (S,) = "
                                     f"({key.shape[1]},), got {tuple(key_padding_mask.shape)}")
                key_padding_mask = ops.reshape(key_padding_mask, (1, -1))
        elif not self.batch_first:                # (L, N, E) -> (N, L, E)
            query, key, value = (ops.swapaxes(t, 0, 1) for t in (query, key, value))
        n, L, E = query.shape
        S = key.shape[1]
        if key_padding_mask is not None and tuple(key_padding_mask.shape) != (n, S):
            raise ValueError(f"{name}: key_padding_mask must be (N, S) = {(n, S)}, got "
                             f"{tuple(key_padding_mask.shape)}")
        if is_causal and attn_mask is None:
            attn_mask = ~np.tril(np.ones((L, S), dtype=bool))
        if attn_mask is not None:
            shape = tuple(attn_mask.shape)
            if shape != (L, S) and shape != (n * self.num_heads, L, S):
                raise ValueError(f"{name}: attn_mask must be (L, S) = {(L, S)} or (N * num_heads, L, S) = "
                                 f"{(n * self.num_heads, L, S)}, got {shape}")
        q, k, v = (self._project(t, i) for i, t in enumerate((query, key, value)))
        if self.bias_k is not None:              # one more key and value, the learned biases
            k = ops.concatenate([k, ops.broadcast_to(ops.reshape(self.bias_k, (1, 1, E)), (n, 1, E))], axis=1)
            v = ops.concatenate([v, ops.broadcast_to(ops.reshape(self.bias_v, (1, 1, E)), (n, 1, E))], axis=1)
            attn_mask = None if attn_mask is None else _pad_column(attn_mask)
            key_padding_mask = None if key_padding_mask is None else _pad_column(key_padding_mask)
        q, k, v = (self._heads(t, n) for t in (q, k, v))
        if self.add_zero_attn:                   # one more key and value, zero, per head
            zeros = np.zeros((n, self.num_heads, 1, self.head_dim), k.dtype)
            k = ops.concatenate([k, zeros], axis=2)
            v = ops.concatenate([v, zeros], axis=2)
            attn_mask = None if attn_mask is None else _pad_column(attn_mask)
            key_padding_mask = None if key_padding_mask is None else _pad_column(key_padding_mask)
        S = k.shape[2]
        scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(self.head_dim))
        if attn_mask is not None:
            m = attn_mask
            if len(m.shape) == 3:                 # (N * H, L, S) -> (N, H, L, S)
                m = ops.reshape(m, (n, self.num_heads, L, S))
            scores = _masked(scores, m, False, name)
        if key_padding_mask is not None:
            scores = _masked(scores, ops.reshape(key_padding_mask, (n, 1, 1, S)), False, name)
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
        extra = "" if self._qkv_same_embed_dim else f", kdim={self.kdim}, vdim={self.vdim}"
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
                f"batch_first={self.batch_first}{extra}")
