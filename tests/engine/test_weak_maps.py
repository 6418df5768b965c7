"""The identity-keyed maps (weakid.IdentityWeakMap) forget an entry when its object goes:
softmax_xent's two maps, the Tensor hooks, the backward() marks of Tensors and scalar Nodes."""
import gc

import numpy as np

import tinytensor as tt
from tinytensor import hooks, scalar
from tinytensor.ops import softmax_xent
from tinytensor.tensor import _BACKWARD_DONE


def _gone_after(table, make):
    gc.collect()                # (an earlier test's objects held in a cycle: not counted as living)
    before = len(table)
    obj = make()
    assert len(table) == before + 1
    del obj
    gc.collect()
    assert len(table) == before


def test_fused_softmax_is_remembered_while_it_lives():
    z = tt.Tensor(np.random.default_rng(0).normal(size=(3, 4)), requires_grad=True)

    def fused():
        p = tt.softmax(z)
        tt.cross_entropy(p, np.array([0, 1, 3]))
        assert softmax_xent.fused_into_loss(p) and not softmax_xent.fused_into_loss(z)
        return p
    _gone_after(softmax_xent.FUSED_INTO_LOSS, fused)


def test_off_tape_softmax_logits_are_forgotten():
    z = np.random.default_rng(1).normal(size=(2, 5))
    _gone_after(softmax_xent._SOFTMAX_LOGITS, lambda: tt.softmax(z))


def test_hooks_go_with_their_tensor():
    x = tt.Tensor(np.ones(3), requires_grad=True)

    def hooked():
        y = x * 2.0
        y.register_hook(lambda g: None)
        return y
    _gone_after(hooks.TENSOR_HOOKS, hooked)


def test_backward_marks_go_with_their_output():
    x = tt.Tensor(np.ones(3), requires_grad=True)

    def loss():
        y = (x * x).sum()
        y.backward()
        assert float(y) == 3.0
        return y
    _gone_after(_BACKWARD_DONE, loss)

    def node_loss():
        y = scalar.Node(2.0, name="a") * scalar.Node(3.0, name="b")
        y.backward()
        assert float(y) == 6.0
        return y
    try:
        _gone_after(scalar._BACKWARD_DONE, node_loss)
    finally:
        scalar.reset_names()     # the scalar tests expect x1, x2, ... from a fresh count
