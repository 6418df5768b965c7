"""As torch.nn.utils.rnn: a batch of sequences of different lengths, packed.

    packed = pack_padded_sequence(x, lengths, enforce_sorted=False)   # x (T, B, *), lengths (B,)
    out, (h_n, c_n) = lstm(packed)          # every step of every sequence, no padding read
    y, lengths = pad_packed_sequence(out)   # (T, B, *) with zeros past each length

`PackedSequence(data, batch_sizes, sorted_indices, unsorted_indices)` as PyTorch's: `data` holds,
time step by time step, the rows of the sequences still running at that step, longest sequences
first; `batch_sizes[t]` is how many. Lengths are host integers (PyTorch keeps them on the CPU too):
they decide shapes, so tt.compile sees them as part of the program's structure, never as data.
Packing and unpacking are indexing and concatenation on the tape: gradients flow through both.
"""

from collections import namedtuple

import numpy as np

from ... import backend, ops
from ...tensor import Tensor
from ...torch_interop import host_array

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence"]


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices",
                                                   "unsorted_indices"])):
    """data (sum(lengths), *), batch_sizes (T,) int64, sorted_indices / unsorted_indices (B,) or
    None (when packed with enforce_sorted=True).

    Examples
    --------
    >>> rnn = tt.nn.utils.rnn
    >>> padded = tt.ones((3, 2, 1))         # (T, B, features): lengths 3 and 1
    >>> packed = rnn.pack_padded_sequence(padded, [3, 1])
    >>> packed.data.shape, packed.batch_sizes   # step 0 has 2 sequences, steps 1 and 2 have 1
    ((4, 1), array([2, 1, 1]))
    >>> packed.lengths()
    array([3, 1])
    >>> output, h_n = tt.nn.GRU(1, 4, rng=0)(packed)   # each sequence stops at its own length
    >>> type(output).__name__, output.data.shape
    ('PackedSequence', (4, 4))
    """

    __slots__ = ()

    def __new__(cls, data, batch_sizes, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = np.argsort(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def lengths(self):
        """Each sequence's length, in the batch's original order."""
        bs = np.asarray(self.batch_sizes)
        lengths = (np.arange(int(bs[0]))[:, None] < bs[None, :]).sum(axis=1)
        return lengths if self.unsorted_indices is None else lengths[self.unsorted_indices]


def _lengths(lengths, batch, name):
    if isinstance(lengths, Tensor) or isinstance(lengths, np.ndarray) and type(lengths) is not np.ndarray:
        lengths = lengths.tolist()       # as a list: under tt.compile a guard (the packing's
        #                                  structure follows the lengths' values; a traced array too)
    lengths = host_array(lengths)
    lengths = np.asarray(backend.to_host(np.asarray(lengths)) if backend.is_array(lengths) else lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu" and not (
            lengths.dtype.kind == "f" and np.all(lengths == np.round(lengths))):
        raise TypeError(f"{name}: lengths must be a 1-D sequence of integers, got {lengths!r}")
    lengths = lengths.astype(np.int64)
    if len(lengths) != batch:
        raise ValueError(f"{name}: got {len(lengths)} lengths for a batch of {batch}")
    if batch and lengths.min() <= 0:
        raise ValueError(f"{name}: every length must be positive (an empty sequence cannot be "
                         f"packed, as in PyTorch), got {lengths.tolist()}")
    return lengths


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (T, B, *) ((B, T, *) with batch_first) of sequences with `lengths`.
    With enforce_sorted=True the lengths must be decreasing (sorted_indices is None); with
    enforce_sorted=False any order, restored by unsorted_indices after the RNN.

    Examples
    --------
    >>> rnn = tt.nn.utils.rnn
    >>> padded = tt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]])   # (B, T): lengths 3 and 2
    >>> packed = rnn.pack_padded_sequence(padded, [3, 2], batch_first=True)
    >>> packed.data                         # time-major, the padding left out
    tensor([1., 4., 2., 5., 3.])
    >>> packed.batch_sizes
    array([2, 2, 1])
    >>> unsorted = rnn.pack_padded_sequence(padded[::-1], [2, 3], batch_first=True, enforce_sorted=False)
    >>> unsorted.sorted_indices, unsorted.lengths()
    (array([1, 0]), array([2, 3]))
    """
    name = "pack_padded_sequence"
    x = input if isinstance(input, Tensor) else Tensor(host_array(input))
    if x.ndim < 2:
        raise ValueError(f"{name}: input must be (T, B, *) or (B, T, *) with batch_first, got shape "
                         f"{tuple(x.shape)}")
    if batch_first:
        x = ops.swapaxes(x, 0, 1)
    T, B = x.shape[:2]
    lengths = _lengths(lengths, B, name)
    if lengths.max() > T:
        raise ValueError(f"{name}: a length {int(lengths.max())} exceeds the {T} time steps of the input")
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise RuntimeError(f"{name}: lengths {lengths.tolist()} must be sorted in decreasing order "
                               f"when enforce_sorted=True; pass enforce_sorted=False to pack them in any "
                               f"order (unsorted_indices restores it)")
        sorted_indices = None
    else:
        sorted_indices = np.argsort(-lengths, kind="stable")
    return _pack(x, lengths, sorted_indices)


def _pack(x, lengths, sorted_indices):
    """x (T, B, *) time-major in the original batch order."""
    order = np.arange(len(lengths)) if sorted_indices is None else sorted_indices
    ordered = lengths[order]
    T = int(ordered[0])
    batch_sizes = (ordered[None, :] > np.arange(T)[:, None]).sum(axis=1).astype(np.int64)
    rows = [x[t, order[:batch_sizes[t]]] for t in range(T)]
    return PackedSequence(ops.concatenate(rows, axis=0), batch_sizes, sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded, lengths): the packed batch as (T, B, *) ((B, T, *) with batch_first), filled with
    padding_value past each length (T = total_length if given), in the original batch order, and
    the lengths as an int64 array.

    Examples
    --------
    >>> rnn = tt.nn.utils.rnn
    >>> packed = rnn.pack_padded_sequence(tt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]]), [3, 2],
    ...                                   batch_first=True)
    >>> padded, lengths = rnn.pad_packed_sequence(packed, batch_first=True, padding_value=-1.0)
    >>> padded
    tensor([[ 1.,  2.,  3.],
            [ 4.,  5., -1.]])
    >>> lengths
    array([3, 2])
    """
    name = "pad_packed_sequence"
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"{name}: expected a PackedSequence (from pack_padded_sequence), got "
                        f"{type(sequence).__name__}")
    data, batch_sizes = sequence.data, np.asarray(sequence.batch_sizes)
    data = data if isinstance(data, Tensor) else Tensor(data)
    B, T = int(batch_sizes[0]), len(batch_sizes)
    if total_length is not None:
        if int(total_length) < T:
            raise ValueError(f"{name}: total_length={total_length} is shorter than the longest "
                             f"sequence ({T})")
        T = int(total_length)
    tail = tuple(data.shape[1:])
    steps, start = [], 0
    for t in range(T):
        n = int(batch_sizes[t]) if t < len(batch_sizes) else 0
        row = data[start:start + n]
        start += n
        if n < B:
            fill = np.full((B - n,) + tail, padding_value, data.dtype)
            row = ops.concatenate([row, fill], axis=0) if n else Tensor(fill)
        steps.append(row)
    padded = ops.stack(steps)                      # (T, B, *) in sorted order
    if sequence.unsorted_indices is not None:
        padded = padded[:, np.asarray(sequence.unsorted_indices)]
    if batch_first:
        padded = ops.swapaxes(padded, 0, 1)
    return padded, sequence.lengths()


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """A list of (L_i, *) Tensors as one (max L, B, *) Tensor ((B, max L, *) with batch_first),
    filled with padding_value, as torch.nn.utils.rnn.pad_sequence.

    Examples
    --------
    >>> seqs = [tt.tensor([1.0, 2.0, 3.0]), tt.tensor([4.0])]
    >>> tt.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    tensor([[1., 2., 3.],
            [4., 0., 0.]])
    >>> tt.nn.utils.rnn.pad_sequence(seqs).shape   # (max length, batch) by default
    (3, 2)
    """
    seqs = [s if isinstance(s, Tensor) else Tensor(host_array(s)) for s in sequences]
    if not seqs:
        raise ValueError("pad_sequence: expected at least one sequence")
    T = max(s.shape[0] for s in seqs)
    rows = []
    for s in seqs:
        pad = np.full((T - s.shape[0],) + tuple(s.shape[1:]), padding_value, s.dtype)
        parts = [s, pad] if padding_side == "right" else [pad, s]
        rows.append(ops.concatenate(parts, axis=0) if pad.shape[0] else s)
    out = ops.stack(rows, axis=0)
    return out if batch_first else ops.swapaxes(out, 0, 1)
