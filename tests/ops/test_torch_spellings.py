"""PyTorch's spellings (issue 23 item 1, issue 19 item 5): dim=/keepdim= with PyTorch's meaning,
the methods NumPy's arrays lack, positional habits that warn or raise, one global generator."""

import warnings

import numpy as np
import pytest

import tinytensor as tt


def leaf(shape, seed=0):
    return tt.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_dim_keepdim_are_axis_keepdims_everywhere():
    x = leaf((3, 4, 5))
    a = x.data
    np.testing.assert_allclose(x.sum(dim=1, keepdim=True).data, a.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(tt.mean(x, dim=(0, 2)).data, a.mean(axis=(0, 2)))
    np.testing.assert_allclose(x.mean(-1, keepdim=True).data, a.mean(-1, keepdims=True))
    np.testing.assert_allclose(tt.softmax(x, dim=-1).data.sum(-1), 1.0)
    np.testing.assert_allclose(tt.log_softmax(x, dim=1).data, tt.log_softmax(x, axis=1).data)
    np.testing.assert_allclose(tt.concatenate([x, x], dim=1).data, np.concatenate([a, a], axis=1))
    np.testing.assert_allclose(tt.cat([x, x], dim=2).data, np.concatenate([a, a], axis=2))
    np.testing.assert_allclose(x.cumsum(dim=2).data, a.cumsum(axis=2))
    np.testing.assert_array_equal(x.argmax(dim=1), a.argmax(axis=1))
    with pytest.raises(TypeError, match="not both"):
        x.sum(axis=1, dim=1)
    # gradients flow through the dim= spellings as through axis=
    x.sum(dim=1, keepdim=True).sum().backward()
    np.testing.assert_allclose(x.grad, np.ones_like(a))


def test_max_min_with_dim_return_values_and_indices():
    x = leaf((4, 3))
    out = x.max(dim=1)
    assert out._fields == ("values", "indices")
    values, indices = out
    np.testing.assert_allclose(values.data, x.data.max(1))
    np.testing.assert_array_equal(indices.data, x.data.argmax(1))
    assert indices.dtype == np.int64
    pair = x.max(-1, keepdim=True)                 # a positional dim with keepdim=: PyTorch's too
    assert pair.values.shape == pair.indices.shape == (4, 1)
    lo = tt.min(x, dim=0, keepdim=True)
    assert lo.values.shape == lo.indices.shape == (1, 3)
    values.sum().backward()             # the values stay on the tape
    assert x.grad.sum() == 4
    assert tt.max(x, axis=1).shape == (4,)   # NumPy's spelling: the values only
    with pytest.raises(TypeError, match="one axis"):
        x.max(dim=(0, 1))


def test_positional_max_unpacked_warns_with_both_spellings():
    out = tt.tensor(np.array([[0.1, 0.9, 0.0], [0.7, 0.2, 0.1]]))   # a batch of 2: unpacks silently in NumPy
    with pytest.warns(UserWarning, match=r"t\.max\(dim=1\)"):
        _, predicted = out.max(1)
    with pytest.warns(UserWarning, match="minima"):
        _, predicted = tt.min(out, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = out.max(1)                       # NumPy's meaning, not iterated: silent
        np.testing.assert_allclose(values.data, [0.9, 0.7])
        _, predicted = out.max(dim=1)
        np.testing.assert_array_equal(predicted.data, [1, 0])
        list(out.max(axis=1))                      # axis= is explicit: no warning


def test_transpose_two_axes():
    m = leaf((2, 3))
    with pytest.raises(ValueError, match="NumPy's identity but PyTorch's"):
        m.transpose(0, 1)
    assert m.transpose(1, 0).shape == (3, 2)                   # the same in both
    assert m.transpose(dim0=0, dim1=1).shape == (3, 2)
    x = leaf((2, 3, 4))
    assert x.transpose(0, 2).shape == (4, 3, 2)                # NumPy raises here: PyTorch's swap
    assert x.transpose(2, 0, 1).shape == (4, 2, 3)             # NumPy's full permutation


def test_split_chunk_permute_and_friends():
    x = leaf((5, 7))
    pieces = x.split(3, dim=1)
    assert [p.shape for p in pieces] == [(5, 3), (5, 3), (5, 1)]
    assert [p.shape for p in x.split([2, 5], dim=1)] == [(5, 2), (5, 5)]
    assert [p.shape for p in x.split(2)] == [(2, 7), (2, 7), (1, 7)]
    assert [p.shape for p in tt.split(x, 7, dim=1)] == [(5, 7)]       # dim=: chunks of 7
    assert [p.shape for p in tt.split(x, 7, axis=1)] == [(5, 1)] * 7  # axis=: NumPy's 7 sections
    with pytest.raises(ValueError, match="add up"):
        x.split([2, 2], dim=1)
    assert [c.shape for c in x.chunk(3, dim=1)] == [(5, 3), (5, 3), (5, 1)]
    assert [c.shape for c in x.chunk(2)] == [(3, 7), (2, 7)]
    sum(p.sum() * (i + 1) for i, p in enumerate(x.split(3, dim=1))).backward()
    np.testing.assert_allclose(x.grad[0], [1, 1, 1, 2, 2, 2, 3])
    y = leaf((2, 3, 4))
    assert y.permute(2, 0, 1).shape == y.permute((2, 0, 1)).shape == (4, 2, 3)
    assert y.contiguous() is y
    assert y.view(6, -1).shape == (6, 4)
    assert y.unsqueeze(1).shape == (2, 1, 3, 4) and y.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert y.unsqueeze(0).squeeze(dim=0).shape == (2, 3, 4)
    assert y.squeeze(dim=1).shape == (2, 3, 4)    # PyTorch's: an axis longer than 1 stays
    assert y.size() == (2, 3, 4) and y.size(1) == 3 and y.size(-1) == 4
    assert y.size == 24 and y.size + 1 == 25     # NumPy's element count too
    assert y.dim() == 3 and y.numel() == 24


def test_std_var_with_dim_are_unbiased_as_pytorch():
    x = leaf((4, 6))
    np.testing.assert_allclose(x.std(dim=1).data, np.std(x.data, axis=1, ddof=1))
    np.testing.assert_allclose(x.var(dim=0, unbiased=False).data, np.var(x.data, axis=0))
    np.testing.assert_allclose(x.std(axis=1).data, np.std(x.data, axis=1))   # NumPy's keeps ddof=0


def test_masked_fill_and_casts():
    x = leaf((2, 3)).astype(np.float32)
    mask = np.array([[True, False, False], [False, False, True]])
    y = x.masked_fill(mask, float("-inf"))
    assert y.dtype == np.float32
    assert np.isneginf(y.data[mask]).all() and (y.data[~mask] == x.data[~mask]).all()
    with pytest.raises(TypeError, match="boolean"):
        x.masked_fill(mask.astype(int), 0.0)
    z = leaf((2, 3))
    z.masked_fill(tt.tensor(mask), 0.0).sum().backward()
    np.testing.assert_array_equal(z.grad, ~mask)
    assert z.float().dtype == np.float32 and z.double().dtype == np.float64
    assert z.long().dtype == np.int64 and z.int().dtype == np.int32 and z.bool().dtype == np.bool_
    assert z.half().dtype == np.float16
    z.grad = None
    z.float().sum().backward()                        # a recorded cast
    assert z.grad.dtype == np.float64 and (z.grad == 1).all()


def test_multinomial():
    tt.manual_seed(0)
    p = np.array([0.0, 0.2, 0.8])
    draws = tt.multinomial(p, 2000, replacement=True)
    assert draws.dtype == np.int64 and draws.shape == (2000,)
    counts = np.bincount(draws.data, minlength=3) / 2000
    np.testing.assert_allclose(counts, p, atol=0.03)
    rows = tt.multinomial(np.ones((4, 6)), 6)        # without replacement: a permutation per row
    assert rows.shape == (4, 6) and all(sorted(r) == list(range(6)) for r in rows.data.tolist())
    with pytest.raises(ValueError, match="without replacement"):
        tt.multinomial(p, 3)
    with pytest.raises(ValueError, match="non-negative"):
        tt.multinomial([-1.0, 2.0], 1)
    np.testing.assert_array_equal(tt.multinomial(p, 5, True, generator=3).data,
                                  tt.multinomial(p, 5, True, generator=3).data)


def test_one_global_generator_behind_every_default():
    tt.manual_seed(123)
    a = (tt.randn(3).data, tt.rand(2).data, tt.nn.Linear(3, 2).weight.data.copy(),
         tt.nn.init.normal_(tt.zeros(4)).data.copy(), tt.multinomial(np.ones(4), 2).data,
         tt.nn.Dropout(0.5)(tt.ones(8)).data, next(tt.data.minibatches(np.arange(6), np.arange(6), 6))[0])
    state = tt.get_rng_state()
    after = tt.randn(2).data
    tt.manual_seed(123)
    b = (tt.randn(3).data, tt.rand(2).data, tt.nn.Linear(3, 2).weight.data.copy(),
         tt.nn.init.normal_(tt.zeros(4)).data.copy(), tt.multinomial(np.ones(4), 2).data,
         tt.nn.Dropout(0.5)(tt.ones(8)).data, next(tt.data.minibatches(np.arange(6), np.arange(6), 6))[0])
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    tt.set_rng_state(state)
    np.testing.assert_array_equal(tt.randn(2).data, after)
    assert state.dtype == np.uint64 and state.shape == (6,)
    tt.manual_seed(124)
    assert not np.array_equal(tt.randn(3).data, a[0])
