"""TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer, as PyTorch's: the same
submodule names (self_attn, multihead_attn, linear1, linear2, norm1..3, dropout, dropout1..3), so
the state-dict keys are PyTorch's and a PyTorch state dict loads as it is; the same forward
(post-norm by default, norm_first=True for pre-norm; activation "relu", "gelu" or a function).
Composed from MultiheadAttention, Linear, LayerNorm and Dropout: both modes from their rules."""

import copy

import numpy as np

from .. import rng as _rng
from . import functional as F
from . import init
from .attention import MultiheadAttention
from .layers import Dropout, LayerNorm, Linear, ModuleList
from .module import Module


def _activation(activation, name):
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise ValueError(f"{name}: activation must be 'relu', 'gelu' or a function, got {activation!r}")


def _clones(module, n):
    """n deep copies (PyTorch's _get_clones): every clone starts with the template's parameter
    values; generators are shared, not copied (the global one for rng=None, as PyTorch's global
    RNG, or the template's seeded one), so the layers' dropout masks differ."""
    shared = {id(_rng._GLOBAL): _rng._GLOBAL}
    for m in module.modules():
        shared.update((id(v), v) for v in vars(m).values() if isinstance(v, np.random.Generator))
    return ModuleList([copy.deepcopy(module, dict(shared)) for _ in range(n)])


class TransformerEncoderLayer(Module):
    """self-attention and a feed-forward block, each with a residual connection and a LayerNorm:
    x = norm1(x + sa(x)); x = norm2(x + ff(x)) (norm_first: x = x + sa(norm1(x)); x = x + ff(norm2(x))).
    forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False).

    Examples
    --------
    >>> layer = tt.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
    ...                                       batch_first=True, rng=0)
    >>> src = tt.randn(2, 5, 8, rng=0)      # (batch, sequence, d_model)
    >>> layer(src).shape
    (2, 5, 8)
    """

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        rng=None,
        dtype=np.float32,
    ):
        super().__init__()
        rng = _rng.generator(rng)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, rng=rng, dtype=dtype
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, rng=rng, dtype=dtype)
        self.dropout = Dropout(dropout, rng=rng)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, rng=rng, dtype=dtype)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.dropout1 = Dropout(dropout, rng=rng)
        self.dropout2 = Dropout(dropout, rng=rng)
        self.activation = _activation(activation, "TransformerEncoderLayer")
        self.batch_first = bool(batch_first)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=is_causal,
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer (each starting from its values, as PyTorch's deep
    copies), applied in turn, then `norm` if given. Keys "layers.0.self_attn.in_proj_weight", ...
    forward(src, mask=None, src_key_padding_mask=None, is_causal=None).

    Examples
    --------
    >>> layer = tt.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
    ...                                       batch_first=True, rng=0)
    >>> encoder = tt.nn.TransformerEncoder(layer, num_layers=2)
    >>> causal = tt.nn.Transformer.generate_square_subsequent_mask(5)   # -inf above the diagonal
    >>> encoder(tt.randn(2, 5, 8, rng=0), mask=causal).shape
    (2, 5, 8)
    >>> "layers.1.self_attn.in_proj_weight" in encoder.state_dict()
    True
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(
                f"TransformerEncoder: encoder_layer must be a Module, got {type(encoder_layer).__name__}"
            )
        self.layers = _clones(encoder_layer, int(num_layers))
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoderLayer(Module):
    """self-attention, attention over `memory` (the encoder's output) and a feed-forward block,
    each with a residual connection and a LayerNorm (norm1..3), as PyTorch's.
    forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False).

    Examples
    --------
    >>> layer = tt.nn.TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
    ...                                       batch_first=True, rng=0)
    >>> memory = tt.randn(2, 6, 8, rng=0)   # the encoder's output
    >>> tgt = tt.randn(2, 4, 8, rng=1)
    >>> causal = tt.nn.Transformer.generate_square_subsequent_mask(4)
    >>> layer(tgt, memory, tgt_mask=causal).shape
    (2, 4, 8)
    """

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        rng=None,
        dtype=np.float32,
    ):
        super().__init__()
        rng = _rng.generator(rng)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, rng=rng, dtype=dtype
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, rng=rng, dtype=dtype
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, rng=rng, dtype=dtype)
        self.dropout = Dropout(dropout, rng=rng)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, rng=rng, dtype=dtype)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.dropout1 = Dropout(dropout, rng=rng)
        self.dropout2 = Dropout(dropout, rng=rng)
        self.dropout3 = Dropout(dropout, rng=rng)
        self.activation = _activation(activation, "TransformerDecoderLayer")
        self.batch_first = bool(batch_first)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=False,
        )[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(
            x,
            mem,
            mem,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=False,
        )[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=False,
        memory_is_causal=False,
    ):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(
                self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal
            )
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer applied in turn to tgt (each attending to `memory`),
    then `norm` if given, as PyTorch's. Keys "layers.0.self_attn.in_proj_weight", ...
    forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False).

    Examples
    --------
    >>> layer = tt.nn.TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
    ...                                       batch_first=True, rng=0)
    >>> decoder = tt.nn.TransformerDecoder(layer, num_layers=2)
    >>> decoder(tt.randn(2, 4, 8, rng=1), tt.randn(2, 6, 8, rng=0)).shape
    (2, 4, 8)
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        if not isinstance(decoder_layer, Module):
            raise TypeError(
                f"TransformerDecoder: decoder_layer must be a Module, got {type(decoder_layer).__name__}"
            )
        self.layers = _clones(decoder_layer, int(num_layers))
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        x = tgt
        for layer in self.layers:
            x = layer(
                x,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal),
                memory_is_causal=memory_is_causal,
            )
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """PyTorch's nn.Transformer: an encoder (num_encoder_layers layers and a final LayerNorm) and
    a decoder (num_decoder_layers layers and a final LayerNorm); every matrix parameter starts
    xavier-uniform, as PyTorch's _reset_parameters. Keys "encoder.layers.0...", "encoder.norm...",
    "decoder.layers.0...", "decoder.norm...". forward(src, tgt, src_mask=None, tgt_mask=None,
    memory_mask=None, src_key_padding_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None, memory_is_causal=False).

    Examples
    --------
    >>> model = tt.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
    ...                           dim_feedforward=16, dropout=0.0, batch_first=True, rng=0)
    >>> src, tgt = tt.randn(2, 6, 8, rng=0), tt.randn(2, 4, 8, rng=1)
    >>> causal = model.generate_square_subsequent_mask(4)
    >>> model(src, tgt, tgt_mask=causal).shape   # one vector per target position
    (2, 4, 8)
    """

    def __init__(
        self,
        d_model=512,
        nhead=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        custom_encoder=None,
        custom_decoder=None,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        rng=None,
        dtype=np.float32,
    ):
        super().__init__()
        rng = _rng.generator(rng)
        kw = dict(
            dropout=dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=batch_first,
            norm_first=norm_first,
            bias=bias,
            rng=rng,
            dtype=dtype,
        )
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, dim_feedforward, **kw),
            num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype),
        )
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, dim_feedforward, **kw),
            num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype),
        )
        self.d_model, self.nhead, self.batch_first = int(d_model), int(nhead), bool(batch_first)
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p, rng=rng)

    def forward(
        self,
        src,
        tgt,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        src_key_padding_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        src_is_causal=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz, dtype=np.float32):
        """(sz, sz) float mask: 0 on and below the diagonal, -inf above (as PyTorch's)."""
        return np.triu(np.full((sz, sz), -np.inf, dtype=dtype), 1)
