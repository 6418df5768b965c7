"""tensor._make is the one writer of a Tensor's slots; Primitive.__call__ inlines its assignments
(for speed), so its outputs are checked against _make's here."""
import numpy as np

import tinytensor as tt
from tinytensor import ops
from tinytensor.tensor import _SLOTS, Tensor, _make


def _slots(t):
    return {s: getattr(t, s) for s in _SLOTS if s not in ("_id", "data")}


def test_make_fills_every_slot():
    t = _make(np.ones(2))
    assert set(_SLOTS) == set(Tensor.__slots__) - {"__weakref__"}
    assert all(hasattr(t, s) for s in _SLOTS)
    assert t.is_leaf and not t.requires_grad and t._version == -1
    u = _make(np.ones(2))
    assert u._id > t._id                    # creation order: the Wengert list's


def test_primitive_output_has_makes_slots():
    x = tt.Tensor(np.arange(3.0), requires_grad=True)
    y = ops.mul(x, 2.0)
    want = _make(y.data, ops.mul, (x, 2.0), [x.data, 2.0], {}, True)
    assert _slots(y).keys() == _slots(want).keys()
    for s, v in _slots(want).items():
        got = getattr(y, s)
        assert got is v or got == v or (isinstance(v, (list, tuple)) and all(
            a is b or a == b for a, b in zip(got, v))), s
    with tt.no_grad():
        z = ops.mul(x, 2.0)
    assert _slots(z) == _slots(_make(z.data))


def test_constructors_share_the_slots():
    a = np.arange(3.0)
    p = tt.nn.Parameter(a)
    assert p.data is a and p.requires_grad and p.is_leaf
    t = tt.Tensor(a, requires_grad=True, name="w")
    d = t.detach()
    assert t.data is not a and d.data is t.data          # Tensor() copies; detach shares
    assert not d.requires_grad and d.name is None and d._prim is None
