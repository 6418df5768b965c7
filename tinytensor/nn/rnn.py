"""Recurrent layers, as PyTorch's: RNN, LSTM, GRU and their cells.

Parameter names, layouts and gate order are PyTorch's (`weight_ih_l0` of shape
(gates * hidden_size, input_size), `weight_hh_l0` (gates * hidden_size, hidden_size), `bias_ih_l0`,
`bias_hh_l0`; `_reverse` for the second direction; LSTM gates i, f, g, o; GRU gates r, z, n with
n = tanh(W_in x + b_in + r * (W_hn h + b_hn))), so a PyTorch state dict loads as it is.

How a layer runs: the input projection x @ W_ih.T + b for every time step is one matmul on the
tape; the loop over time is one primitive per layer and direction (`lstm_seq`, `gru_seq`,
`rnn_seq`) whose forward is a NumPy loop over (batch, hidden) matrices and whose VJP is
backpropagation through time (one joint rule: dW_hh is a single matmul over all steps at the
end). Its output holds, per step, the hidden state and what the VJP needs (the LSTM's cell state
and gate activations), so the backward recomputes nothing; the layer's outputs are slices of it.
The VJP and JVP rules are written with NumPy functions that Tensors dispatch, so they run on
Tensors too: higher derivatives (tt.grad(tt.grad(f)), tt.hvp) work through the loop.
"""

import math

import numpy as np

from .. import backend, ops
from ..ops.batching import BatchArray
from ..ops.table import _expit, defprim
from ..rng import generator
from ..tensor import Tensor
from . import functional as F
from .module import Module, cast_input
from .parameter import Parameter
from .utils.rnn import PackedSequence, _pack, pad_packed_sequence


def _sigmoid(z):
    """1 / (1 + exp(-z)) as 0.5 tanh(z / 2) + 0.5, in place on the temporary z: no overflow, and
    4x faster than scipy.special.expit on float32 (the loops' one elementwise hot spot)."""
    if type(z) is not np.ndarray:
        return _expit(z)
    np.multiply(z, 0.5, out=z)
    np.tanh(z, out=z)
    np.multiply(z, 0.5, out=z)
    np.add(z, 0.5, out=z)
    return z


def _prev(Y, t, first, lo, hi):
    """State at step t - 1 (columns lo:hi of the saved output), or the initial state."""
    return first if t == 0 else Y[t - 1, :, lo:hi]


# ----- LSTM: Y[t] = [h, c, i, f, g, o] --------------------------------------------------------
def _lstm_forward(xp, h0, c0, whh):
    T, B = xp.shape[:2]
    H = h0.shape[-1]
    ns = backend.namespace(xp)
    Y = ns.empty((T, B, 6 * H), dtype=np.result_type(xp, h0, c0, whh))
    whh_t = ns.ascontiguousarray(whh.T)   # C order: OpenBLAS runs the (B, H) @ (H, gH) products 1.5x faster
    h, c = h0, c0
    for t in range(T):
        z = xp[t] + h @ whh_t
        out = Y[t]
        g = ns.tanh(z[:, 2 * H:3 * H])
        out[:, 2 * H:6 * H] = _sigmoid(z)   # (in place on z) g's columns are overwritten next
        out[:, 4 * H:5 * H] = g
        i, f, o = out[:, 2 * H:3 * H], out[:, 3 * H:4 * H], out[:, 5 * H:6 * H]
        c = out[:, H:2 * H] = f * c + i * g
        h = out[:, :H] = o * ns.tanh(c)
    return Y


def _numpy_floats(*arrays):
    """Whether the fast NumPy loops below apply: plain NumPy arrays of one float dtype (Tensors, in
    higher-order rules, and other libraries' arrays take the general code)."""
    dtype = arrays[0].dtype
    return dtype.kind == "f" and all(type(a) is np.ndarray and a.dtype == dtype for a in arrays)


# The backward's NumPy loop: the same formulas, with what does not depend on the recurrence
# (the gates' slopes, tanh(c), o (1 - tanh(c)^2)) computed for a block of steps at once, and one
# ufunc call per remaining quantity into buffers made once. The general code below makes ~30
# temporaries a step on (B, H) column blocks, and between the step's matmuls those calls are the
# time. Blocks of ~1 MB of gates: computed for all steps at once, the slopes of a long sequence
# (T=100 B=32 H=256: 13 MB) leave the cache before the loop reads them back, and the step was then
# slower than with the general code (1.07x); in 256 kB blocks the T=35 case gained less. bench_rnn's
# step against main's, in one process (CPU time, 2-core EPYC, loaded): T=35 B=20 H=128 0.91x,
# T=100 B=32 H=256 0.94x. The forward's loop, written the same way, was no faster than the one
# above (its matmul is most of each step): it stays as it is.
_BLOCK_BYTES = 1024 * 1024


def _lstm_vjp_numpy(gY, Y, h0, c0, whh):
    """_lstm_vjp on NumPy arrays: dz = slope * [gc g + gy_i, gc c_prev + gy_f, gc i + gy_g,
    gh tanh(c) + gy_o] with slope the gates' derivatives (a - a^2 for i, f, o; 1 - g^2 for g), and
    the cell's cotangent gc = gy_c + dc + gh o (1 - tanh(c)^2), where o tanh(c)^2 = h tanh(c).
    The cotangents of the cell states and gates are zero unless the caller used them (a layer
    exposes c_n at most): their additions are skipped in a block where they are."""
    T, B = Y.shape[:2]
    H = h0.shape[-1]
    dtype = Y.dtype
    hs, cs, gates = Y[..., :H], Y[..., H:2 * H], Y[..., 2 * H:]
    gy_h, gy_c, gy_gates = gY[..., :H], gY[..., H:2 * H], gY[..., 2 * H:]
    dz = np.empty((T, B, 4 * H), dtype)               # the slopes, then times m in the loop
    tc, to_cell = np.empty((T, B, H), dtype), np.empty((T, B, H), dtype)
    m = np.empty((B, 4 * H), dtype)
    m4 = m.reshape(B, 4, H)
    gh, gc, dc, dh = (np.zeros((B, H), dtype) for _ in range(4))
    block = max(1, _BLOCK_BYTES // max(1, B * 4 * H * dz.itemsize))
    for t in range(T - 1, -1, -1):
        if (T - 1 - t) % block == 0:                  # the next block of steps, [lo, t]
            steps = slice(max(0, t + 1 - block), t + 1)
            a, s = gates[steps], dz[steps]
            np.multiply(a, a, out=s)
            np.subtract(a[..., :2 * H], s[..., :2 * H], out=s[..., :2 * H])
            np.subtract(1, s[..., 2 * H:3 * H], out=s[..., 2 * H:3 * H])
            np.subtract(a[..., 3 * H:], s[..., 3 * H:], out=s[..., 3 * H:])
            np.tanh(cs[steps], out=tc[steps])
            np.multiply(hs[steps], tc[steps], out=to_cell[steps])
            np.subtract(a[..., 3 * H:], to_cell[steps], out=to_cell[steps])     # o (1 - tanh(c)^2)
            cell_cotangent, gate_cotangent = gy_c[steps].any(), gy_gates[steps].any()
        a4 = gates[t].reshape(B, 4, H)
        np.add(gy_h[t], dh, out=gh)
        np.multiply(gh, to_cell[t], out=gc)
        if cell_cotangent:
            gc += gy_c[t]
        gc += dc
        np.multiply(a4[:, 2::-2], gc[:, None], out=m4[:, 0::2])     # [gc g, gc i] in one call
        np.multiply(gc, c0 if t == 0 else cs[t - 1], out=m4[:, 1])
        np.multiply(gh, tc[t], out=m4[:, 3])
        if gate_cotangent:
            m += gy_gates[t]
        dz[t] *= m
        np.multiply(gc, a4[:, 1], out=dc)
        np.matmul(dz[t], whh, out=dh)
    h_before = _states_before(hs, h0)
    return dz, dh, dc, dz.reshape(-1, 4 * H).T @ h_before.reshape(-1, H)


def _lstm_vjp(gY, Y, xp, h0, c0, whh):
    if _numpy_floats(gY, Y, h0, c0, whh):
        return _lstm_vjp_numpy(gY, Y, h0, c0, whh)
    T, H = Y.shape[0], h0.shape[-1]
    dh = dc = 0
    dz = [None] * T
    for t in range(T - 1, -1, -1):
        y, gy = Y[t], gY[t]
        i, f, g, o = y[:, 2 * H:3 * H], y[:, 3 * H:4 * H], y[:, 4 * H:5 * H], y[:, 5 * H:]
        gh = gy[:, :H] + dh
        tc = np.tanh(y[:, H:2 * H])
        gc = gy[:, H:2 * H] + dc + gh * o * (1 - tc * tc)
        d = dz[t] = np.concatenate([(gc * g + gy[:, 2 * H:3 * H]) * i * (1 - i),
                                    (gc * _prev(Y, t, c0, H, 2 * H) + gy[:, 3 * H:4 * H]) * f * (1 - f),
                                    (gc * i + gy[:, 4 * H:5 * H]) * (1 - g * g),
                                    (gh * tc + gy[:, 5 * H:]) * o * (1 - o)], axis=1)
        dc = gc * f
        dh = d @ whh
    dz = np.stack(dz)
    hs = _states_before(Y[:, :, :H], h0)
    return dz, dh, dc, dz.reshape(-1, 4 * H).T @ hs.reshape(-1, H)


def _states_before(hs, h0):
    """[h0, h_0, ..., h_{T-2}]: the state each step started from, (T, B, H)."""
    return np.concatenate([h0[None], hs[:-1]], axis=0)


def _lstm_jvp(ts, Y, xp, h0, c0, whh):
    txp, th0, tc0, twhh = ts
    T, H = Y.shape[0], h0.shape[-1]
    dh = 0 if th0 is None else th0
    dc = 0 if tc0 is None else tc0
    tY = []
    for t in range(T):
        y = Y[t]
        i, f, g, o = y[:, 2 * H:3 * H], y[:, 3 * H:4 * H], y[:, 4 * H:5 * H], y[:, 5 * H:]
        c_prev = _prev(Y, t, c0, H, 2 * H)
        dz = 0 if th0 is None and t == 0 else dh @ whh.T
        if txp is not None:
            dz = dz + txp[t]
        if twhh is not None:
            dz = dz + _prev(Y, t, h0, 0, H) @ twhh.T
        if isinstance(dz, int):                   # only c0 moves: no gate moves at this step
            dz = Y[0, :, :4 * H] * 0
        di = dz[:, :H] * i * (1 - i)
        df = dz[:, H:2 * H] * f * (1 - f)
        dg = dz[:, 2 * H:3 * H] * (1 - g * g)
        do = dz[:, 3 * H:] * o * (1 - o)
        dc = df * c_prev + f * dc + di * g + i * dg
        tc = np.tanh(y[:, H:2 * H])
        dh = do * tc + o * (1 - tc * tc) * dc
        tY.append(np.concatenate([dh, dc, di, df, dg, do], axis=1))
    return np.stack(tY)


lstm_seq = defprim(_lstm_forward, "lstm_seq", vjp=_lstm_vjp, jvp=_lstm_jvp, nargs=4)


# ----- GRU: Y[t] = [h, r, z, n, W_hn h + b_hn] -------------------------------------------------
def _gru_forward(xp, h0, whh, bhh):
    T, B = xp.shape[:2]
    H = h0.shape[-1]
    ns = backend.namespace(xp)
    Y = ns.empty((T, B, 5 * H), dtype=np.result_type(xp, h0, whh, bhh))
    whh_t = ns.ascontiguousarray(whh.T)   # C order: OpenBLAS runs the (B, H) @ (H, gH) products 1.5x faster
    h = h0
    for t in range(T):
        x, out = xp[t], Y[t]
        hw = h @ whh_t + bhh
        rz = out[:, H:3 * H] = _sigmoid(x[:, :2 * H] + hw[:, :2 * H])
        r, z = rz[:, :H], rz[:, H:]
        hn = out[:, 4 * H:] = hw[:, 2 * H:]
        n = out[:, 3 * H:4 * H] = ns.tanh(x[:, 2 * H:] + r * hn)
        h = out[:, :H] = n + z * (h - n)
    return Y


def _gru_vjp(gY, Y, xp, h0, whh, bhh):
    T, H = Y.shape[0], h0.shape[-1]
    dx, dhw = [None] * T, [None] * T
    dh = 0
    for t in range(T - 1, -1, -1):
        y, gy = Y[t], gY[t]
        r, z, n, hn = y[:, H:2 * H], y[:, 2 * H:3 * H], y[:, 3 * H:4 * H], y[:, 4 * H:]
        gh = gy[:, :H] + dh
        dn = (gh * (1 - z) + gy[:, 3 * H:4 * H]) * (1 - n * n)
        dr = (dn * hn + gy[:, H:2 * H]) * r * (1 - r)
        dzp = (gh * (_prev(Y, t, h0, 0, H) - n) + gy[:, 2 * H:3 * H]) * z * (1 - z)
        dx[t] = np.concatenate([dr, dzp, dn], axis=1)
        dht = dhw[t] = np.concatenate([dr, dzp, dn * r + gy[:, 4 * H:]], axis=1)
        dh = gh * z + dht @ whh
    dx, dhw = np.stack(dx), np.stack(dhw)
    hs = _states_before(Y[:, :, :H], h0)
    flat = dhw.reshape(-1, 3 * H)
    return dx, dh, flat.T @ hs.reshape(-1, H), flat.sum(axis=0)


def _gru_jvp(ts, Y, xp, h0, whh, bhh):
    txp, th0, twhh, tbhh = ts
    T, H = Y.shape[0], h0.shape[-1]
    dh = 0 if th0 is None else th0
    tY = []
    for t in range(T):
        y = Y[t]
        r, z, n, hn = y[:, H:2 * H], y[:, 2 * H:3 * H], y[:, 3 * H:4 * H], y[:, 4 * H:]
        h_prev = _prev(Y, t, h0, 0, H)
        dhw = (Y[0, :, :3 * H] * 0) if th0 is None and t == 0 else dh @ whh.T
        if twhh is not None:
            dhw = dhw + h_prev @ twhh.T
        if tbhh is not None:
            dhw = dhw + tbhh
        dpre, dn_in = dhw[:, :2 * H], 0
        if txp is not None:
            dpre, dn_in = dpre + txp[t][:, :2 * H], txp[t][:, 2 * H:]
        dr = dpre[:, :H] * r * (1 - r)
        dz = dpre[:, H:] * z * (1 - z)
        dhn = dhw[:, 2 * H:]
        dn = (dr * hn + r * dhn + dn_in) * (1 - n * n)
        dh = dn + dz * (h_prev - n) + z * (dh - dn)
        tY.append(np.concatenate([dh, dr, dz, dn, dhn], axis=1))
    return np.stack(tY)


gru_seq = defprim(_gru_forward, "gru_seq", vjp=_gru_vjp, jvp=_gru_jvp, nargs=4)


# ----- Elman RNN: Y[t] = h ----------------------------------------------------------------------
def _rnn_forward(xp, h0, whh, nonlinearity="tanh"):
    T, B = xp.shape[:2]
    ns = backend.namespace(xp)
    Y = ns.empty((T, B, h0.shape[-1]), dtype=np.result_type(xp, h0, whh))
    whh_t = ns.ascontiguousarray(whh.T)   # C order: OpenBLAS runs the (B, H) @ (H, gH) products 1.5x faster
    h = h0
    for t in range(T):
        pre = xp[t] + h @ whh_t
        h = Y[t] = ns.tanh(pre) if nonlinearity == "tanh" else ns.maximum(pre, 0)
    return Y


def _rnn_slope(h, nonlinearity):
    return 1 - h * h if nonlinearity == "tanh" else (h > 0).astype(h.dtype)


def _rnn_vjp(gY, Y, xp, h0, whh, nonlinearity="tanh"):
    T, H = Y.shape[0], Y.shape[-1]
    dpre = [None] * T
    dh = 0
    for t in range(T - 1, -1, -1):
        d = dpre[t] = (gY[t] + dh) * _rnn_slope(Y[t], nonlinearity)
        dh = d @ whh
    dpre = np.stack(dpre)
    hs = _states_before(Y, h0)
    return dpre, dh, dpre.reshape(-1, H).T @ hs.reshape(-1, H)


def _rnn_jvp(ts, Y, xp, h0, whh, nonlinearity="tanh"):
    txp, th0, twhh = ts
    T, H = Y.shape[0], Y.shape[-1]
    dh = 0 if th0 is None else th0
    tY = []
    for t in range(T):
        d = Y[0] * 0 if th0 is None and t == 0 else dh @ whh.T
        if txp is not None:
            d = d + txp[t]
        if twhh is not None:
            d = d + _prev(Y, t, h0, 0, H) @ twhh.T
        dh = d * _rnn_slope(Y[t], nonlinearity)
        tY.append(dh)
    return np.stack(tY)


rnn_seq = defprim(_rnn_forward, "rnn_seq", vjp=_rnn_vjp, jvp=_rnn_jvp, nargs=3)


# ----- the layers ------------------------------------------------------------------------------
_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _uniform(rng, bound, shape, dtype):
    return Parameter(rng.uniform(-bound, bound, shape).astype(dtype))


def _run(mode, xp_in, h0, c0, w_ih, w_hh, b_ih, b_hh, H, w_hr=None):
    """One layer and direction over time-major input (T, B, I) (a Tensor or an array) from h0
    (and c0): returns (outputs (T, B, H), the cell states (T, B, H) or None)."""
    if w_hr is not None:
        return _run_projected(xp_in, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, H)
    # The input projection for every step at once: one linear entry (the bias added in place on
    # the product, and a C-ordered weight gradient), F.linear as nn.Linear's.
    if mode == "GRU":
        xp = F.linear(xp_in, w_ih, b_ih)
        bhh = b_hh if b_hh is not None else backend.namespace(w_hh).zeros(3 * H, w_hh.dtype)
        Y = gru_seq(xp, h0, w_hh, bhh)
    else:
        xp = F.linear(xp_in, w_ih, None if b_ih is None else b_ih + b_hh)
        if mode == "LSTM":
            Y = lstm_seq(xp, h0, c0, w_hh)
        else:
            Y = rnn_seq(xp, h0, w_hh, nonlinearity="tanh" if mode == "RNN_TANH" else "relu")
    if not isinstance(Y, (Tensor, BatchArray)):      # (a BatchArray: inside tt.vmap)
        Y = Tensor(Y)
    out = Y if mode.startswith("RNN") else Y[:, :, :H]
    return out, (Y[:, :, H:2 * H] if mode == "LSTM" else None)


def _run_projected(xp_in, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, H):
    """An LSTM with proj_size (PyTorch's LSTMP): h_t = (o_t * tanh(c_t)) @ W_hr^T, of size
    proj_size. Composed step by step from primitives (both rules from theirs)."""
    xp = ops.matmul(xp_in, w_ih.T)
    if b_ih is not None:
        xp = xp + (b_ih + b_hh)
    h, c, hs, cs = h0, c0, [], []
    for t in range(xp.shape[0]):
        z = xp[t] + ops.matmul(h, w_hh.T)
        i, f = ops.sigmoid(z[:, :H]), ops.sigmoid(z[:, H:2 * H])
        g, o = ops.tanh(z[:, 2 * H:3 * H]), ops.sigmoid(z[:, 3 * H:])
        c = f * c + i * g
        h = ops.matmul(o * ops.tanh(c), w_hr.T)
        hs.append(h)
        cs.append(c)
    return ops.stack(hs), ops.stack(cs)


def _last(seq, lengths):
    """seq (T, B, *) at each sequence's last step: seq[-1], or seq[lengths - 1, b] (packed)."""
    if lengths is None:
        return seq[-1]
    return seq[lengths - 1, np.arange(len(lengths))]


def _state(value, shape, like, name, what):
    dtype = like.dtype
    if value is None:
        return backend.namespace(like).zeros(shape, dtype)     # on the weights' device
    value = cast_input(value, dtype)
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{name}: the initial {what} has shape {tuple(value.shape)} but this input "
                         f"needs {tuple(shape)} (num_layers * num_directions, batch, hidden_size)")
    return value


class RNNBase(Module):
    """The shared machinery of RNN, LSTM and GRU (PyTorch's RNNBase)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, rng=None, dtype=np.float32, proj_size=0):
        super().__init__()
        name = type(self).__name__
        proj_size = int(proj_size)
        if proj_size < 0 or (proj_size and mode != "LSTM") or (proj_size and proj_size >= int(hidden_size)):
            raise ValueError(f"{name}: proj_size must be 0, or (LSTM only) between 1 and hidden_size - 1 "
                             f"({int(hidden_size) - 1}), got {proj_size}")
        self.proj_size = proj_size
        if int(input_size) < 1 or int(hidden_size) < 1 or int(num_layers) < 1:
            raise ValueError(f"{name}: input_size, hidden_size and num_layers must be positive, got "
                             f"{input_size}, {hidden_size}, {num_layers}")
        if not 0 <= float(dropout) <= 1:
            raise ValueError(f"{name}: dropout must be in [0, 1], got {dropout}")
        self.mode = mode
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers = int(num_layers)
        self.bias, self.batch_first, self.bidirectional = bool(bias), bool(batch_first), bool(bidirectional)
        self.dropout = float(dropout)
        self.rng = generator(rng)
        dtype = np.dtype(dtype)
        H = self.hidden_size
        gates = _GATES[mode] * H
        bound = 1 / math.sqrt(H)
        P = proj_size or H                   # the size of h (and of each direction's output)
        for layer in range(self.num_layers):
            width = self.input_size if layer == 0 else P * self._directions
            for suffix in self._suffixes:
                key = f"l{layer}{suffix}"
                setattr(self, f"weight_ih_{key}", _uniform(self.rng, bound, (gates, width), dtype))
                setattr(self, f"weight_hh_{key}", _uniform(self.rng, bound, (gates, P), dtype))
                if self.bias:
                    setattr(self, f"bias_ih_{key}", _uniform(self.rng, bound, (gates,), dtype))
                    setattr(self, f"bias_hh_{key}", _uniform(self.rng, bound, (gates,), dtype))
                if proj_size:
                    setattr(self, f"weight_hr_{key}", _uniform(self.rng, bound, (proj_size, H), dtype))

    _directions = property(lambda self: 2 if self.bidirectional else 1)
    _suffixes = property(lambda self: ("", "_reverse") if self.bidirectional else ("",))

    def _weights(self, key):
        return (getattr(self, f"weight_ih_{key}"), getattr(self, f"weight_hh_{key}"),
                getattr(self, f"bias_ih_{key}", None), getattr(self, f"bias_hh_{key}", None))

    def forward(self, input, hx=None):
        """(output, h_n) ((output, (h_n, c_n)) for LSTM). `input` may be a PackedSequence
        (nn.utils.rnn.pack_padded_sequence): each sequence then runs over its own length only (the
        reverse direction starts at its last element), h_n holds each one's last state, in the
        batch's original order, and the output is packed the same way."""
        if isinstance(input, PackedSequence):
            padded, lengths = pad_packed_sequence(input)
            output, state = self._forward(padded, hx, lengths)
            return _pack(output, lengths, input.sorted_indices), state
        return self._forward(input, hx, None)

    def _forward(self, input, hx, lengths):
        name = type(self).__name__
        dtype = self.weight_ih_l0.dtype
        x = cast_input(input, dtype)
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            raise ValueError(f"{name}: expected input of shape (seq_len, batch, {self.input_size}) "
                             f"{'(batch_first) ' if self.batch_first else ''}or (seq_len, "
                             f"{self.input_size}) unbatched, got {tuple(x.shape)}")
        unbatched = x.ndim == 2
        if unbatched:
            x = x[:, None]
        elif self.batch_first and lengths is None:       # a packed batch is time-major already
            x = ops.swapaxes(x, 0, 1) if isinstance(x, Tensor) else x.swapaxes(0, 1)
        if x.shape[0] == 0:
            raise ValueError(f"{name}: the input has no time steps (shape {tuple(input.shape)})")
        lstm = self.mode == "LSTM"
        if hx is not None and lstm and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
            raise TypeError(f"{name}: the initial state is a tuple (h_0, c_0), got {type(hx).__name__}")
        P = self.proj_size or self.hidden_size
        shape = (self.num_layers * self._directions, x.shape[1], P)
        h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        if unbatched:
            h0, c0 = (None if s is None else (s if isinstance(s, Tensor) else backend.asarray(s))[:, None]
                      for s in (h0, c0))
        weights = self.weight_ih_l0
        h0 = _state(h0, shape, weights, name, "hidden state h_0")
        c0 = _state(c0, shape[:2] + (self.hidden_size,), weights, name, "cell state c_0") if lstm else None
        if lengths is not None:            # each sequence reversed within its own length
            t = np.arange(x.shape[0])[:, None]
            reverse = (np.where(t < lengths, lengths - 1 - t, t), np.arange(len(lengths)))
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(self._suffixes):
                k = layer * self._directions + d
                flip = (slice(None, None, -1),) if lengths is None else reverse
                seq = x if d == 0 else x[flip]
                out, cs = _run(self.mode, seq, h0[k], None if c0 is None else c0[k],
                               *self._weights(f"l{layer}{suffix}"), self.hidden_size,
                               getattr(self, f"weight_hr_l{layer}{suffix}", None))
                outs.append(out if d == 0 else out[flip])
                h_n.append(_last(out, lengths))
                c_n.append(None if cs is None else _last(cs, lengths))
            x = outs[0] if len(outs) == 1 else ops.concatenate(outs, axis=-1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True, self.rng)
        output = x
        h_n = ops.stack(h_n)
        c_n = ops.stack(c_n) if lstm else None
        if unbatched:
            output, h_n = output[:, 0], h_n[:, 0]
            c_n = c_n[:, 0] if lstm else None
        elif self.batch_first and lengths is None:
            output = ops.swapaxes(output, 0, 1)
        return (output, (h_n, c_n)) if lstm else (output, h_n)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        for key, default in (("bias", True), ("batch_first", False), ("dropout", 0.0),
                             ("bidirectional", False), ("proj_size", 0)):
            if getattr(self, key) != default:
                s += f", {key}={getattr(self, key)}"
        return s


class RNN(RNNBase):
    """h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (nonlinearity="relu": max(., 0)).
    forward(input, h_0=None) -> (output, h_n), as PyTorch's nn.RNN.

    Examples
    --------
    >>> rnn = tt.nn.RNN(input_size=3, hidden_size=5, num_layers=2, rng=0)
    >>> x = tt.ones((7, 2, 3))              # (time, batch, features)
    >>> output, h_n = rnn(x)
    >>> output.shape, h_n.shape             # every step's top layer; each layer's last step
    ((7, 2, 5), (2, 2, 5))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, rng=None, dtype=np.float32):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_" + nonlinearity.upper(), input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, rng, dtype)


class LSTM(RNNBase):
    """PyTorch's nn.LSTM (gates i, f, g, o): forward(input, (h_0, c_0)=None) ->
    (output, (h_n, c_n)). With proj_size > 0, h_t = W_hr (o_t * tanh(c_t)) of size proj_size
    (weight_hr_l{k} (proj_size, hidden_size); h_0 and the output have proj_size features).

    Examples
    --------
    >>> lstm = tt.nn.LSTM(input_size=3, hidden_size=5, batch_first=True, rng=0)
    >>> output, (h_n, c_n) = lstm(tt.ones((2, 7, 3)))   # (batch, time, features)
    >>> output.shape, h_n.shape, c_n.shape
    ((2, 7, 5), (1, 2, 5), (1, 2, 5))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, rng=None, dtype=np.float32, proj_size=0):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, rng, dtype, proj_size)


class GRU(RNNBase):
    """PyTorch's nn.GRU (gates r, z, n): forward(input, h_0=None) -> (output, h_n).

    Examples
    --------
    >>> gru = tt.nn.GRU(input_size=3, hidden_size=5, bidirectional=True, rng=0)
    >>> output, h_n = gru(tt.ones((7, 2, 3)))
    >>> output.shape, h_n.shape             # both directions' features, side by side
    ((7, 2, 10), (2, 2, 5))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, rng=None, dtype=np.float32):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, rng, dtype)


# ----- cells: one step, the same primitives over a sequence of length one ----------------------
class RNNCellBase(Module):
    def __init__(self, mode, input_size, hidden_size, bias, rng, dtype):
        super().__init__()
        name = type(self).__name__
        if int(input_size) < 1 or int(hidden_size) < 1:
            raise ValueError(f"{name}: input_size and hidden_size must be positive, got "
                             f"{input_size}, {hidden_size}")
        self.mode = mode
        self.input_size, self.hidden_size, self.bias = int(input_size), int(hidden_size), bool(bias)
        rng = generator(rng)
        dtype = np.dtype(dtype)
        gates = _GATES[mode] * self.hidden_size
        bound = 1 / math.sqrt(self.hidden_size)
        self.weight_ih = _uniform(rng, bound, (gates, self.input_size), dtype)
        self.weight_hh = _uniform(rng, bound, (gates, self.hidden_size), dtype)
        self.bias_ih = _uniform(rng, bound, (gates,), dtype) if bias else None
        self.bias_hh = _uniform(rng, bound, (gates,), dtype) if bias else None

    def _step(self, input, hx):
        name = type(self).__name__
        dtype = self.weight_ih.dtype
        x = cast_input(input, dtype)
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise ValueError(f"{name}: expected input of shape (batch, {self.input_size}) or "
                             f"({self.input_size},), got {tuple(x.shape)}")
        unbatched = x.ndim == 1
        x = x[None] if unbatched else x            # (1, B, I): a sequence of one step
        x = x[None]
        batch = x.shape[1]
        lstm = self.mode == "LSTM"
        h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        states = []
        for s, what in ((h0, "hidden state"), (c0, "cell state")):
            if s is None:
                states.append(backend.namespace(self.weight_ih).zeros((batch, self.hidden_size), dtype))
                continue
            s = cast_input(s, dtype)
            if tuple(s.shape) != ((self.hidden_size,) if unbatched else (batch, self.hidden_size)):
                raise ValueError(f"{name}: the {what} has shape {tuple(s.shape)}; expected "
                                 f"{(batch, self.hidden_size) if not unbatched else (self.hidden_size,)}")
            states.append(s[None] if unbatched else s)
        out, cs = _run(self.mode, x, states[0], states[1] if lstm else None, self.weight_ih,
                       self.weight_hh, self.bias_ih, self.bias_hh, self.hidden_size)
        h, c = out[-1], (cs[-1] if lstm else None)
        if unbatched:
            h, c = h[0], (c[0] if lstm else None)
        return (h, c) if lstm else h

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh); forward(input, hx=None) -> h'.

    Examples
    --------
    >>> cell = tt.nn.RNNCell(3, 5, rng=0)
    >>> h = None
    >>> for x_t in tt.ones((4, 2, 3)):       # one step at a time
    ...     h = cell(x_t, h)
    >>> h.shape
    (2, 5)
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", rng=None, dtype=np.float32):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_" + nonlinearity.upper(), input_size, hidden_size, bias, rng, dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx)


class LSTMCell(RNNCellBase):
    """One LSTM step; forward(input, (h, c)=None) -> (h', c').

    Examples
    --------
    >>> cell = tt.nn.LSTMCell(3, 5, rng=0)
    >>> h, c = cell(tt.ones((2, 3)))
    >>> h, c = cell(tt.ones((2, 3)), (h, c))
    >>> h.shape, c.shape
    ((2, 5), (2, 5))
    """

    def __init__(self, input_size, hidden_size, bias=True, rng=None, dtype=np.float32):
        super().__init__("LSTM", input_size, hidden_size, bias, rng, dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx)


class GRUCell(RNNCellBase):
    """One GRU step; forward(input, hx=None) -> h'.

    Examples
    --------
    >>> cell = tt.nn.GRUCell(3, 5, rng=0)
    >>> h = cell(tt.ones((2, 3)))
    >>> cell(tt.ones((2, 3)), h).shape
    (2, 5)
    """

    def __init__(self, input_size, hidden_size, bias=True, rng=None, dtype=np.float32):
        super().__init__("GRU", input_size, hidden_size, bias, rng, dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx)
