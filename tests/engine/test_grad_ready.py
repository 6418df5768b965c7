"""tape.GRAD_READY: backward() hands a leaf over as soon as every node that uses it has been swept
(DistributedDataParallel starts its all-reduce there). The leaf's .grad must then be complete,
the hook must run once per backward, and the gradients must equal those of a plain backward."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import tape


@pytest.fixture
def ready():
    """GRAD_READY entries made by a test, removed after it (the map is process-wide)."""
    added = []

    def watch(leaf, hook):
        tape.GRAD_READY[leaf] = hook
        added.append(leaf)
    yield watch
    for leaf in added:
        tape.GRAD_READY.pop(leaf)


@pytest.fixture(scope="module")
def blocked():
    """An identity whose VJP gives its input nothing (None): the node using q there is in the
    graph but never gets a cotangent, so it is never swept."""
    prim = tt.primitive(lambda x: x * 1.0, name="test_grad_ready_blocked")
    prim.defvjp(lambda g, ans, x: None)
    prim.defjvp(lambda t, ans, x: None)
    yield prim
    tape.REGISTRY.pop("test_grad_ready_blocked", None)


def leaves(seed=0):
    rng = np.random.default_rng(seed)
    return {name: tt.tensor(rng.standard_normal(shape), requires_grad=True)
            for name, shape in (("w", (3, 3)), ("v", (3,)), ("q", (3,)), ("x", (4, 3)))}


def loss_of(t, order, blocked):
    z = t["x"] @ t["w"]                     # w's first use (its last consumer in the sweep)
    z.register_hook(lambda g: order.append("z"))
    h = tt.tanh(z + t["v"])                 # v's only use
    return ((h @ t["w"]).sum()              # w again
            + (t["w"] * t["w"]).sum()       # and a penalty on w, added after the forward
            + (t["q"] * 3.0).sum()          # q: one use that gets a cotangent ...
            + blocked(t["q"] * 2.0).sum())  # ... and one that never does


def test_each_leaf_is_handed_over_once_complete_and_as_soon_as_its_uses_are_swept(ready, blocked):
    plain, order = leaves(), []
    loss_of(plain, order, blocked).backward()
    t, order, seen = leaves(), [], []
    t["w"].grad = np.ones((3, 3))           # accumulates: the hook sees the sum
    for name in ("w", "v", "q"):
        ready(t[name], lambda leaf, name=name: seen.append((name, leaf.grad.copy(), list(order))))
    loss_of(t, order, blocked).backward()
    assert [name for name, _, _ in seen] == ["v", "w", "q"]
    by_name = {name: (grad, before) for name, grad, before in seen}
    assert by_name["v"][1] == []            # v: before the sweep reached x @ w
    assert by_name["w"][1] == ["z"]         # w: right after x @ w, its last use
    # q's second use never gets a cotangent: q is finished with the leaves after the sweep
    for name in ("v", "w", "q"):
        assert np.array_equal(by_name[name][0], t[name].grad)
    for name in ("v", "q", "x"):
        assert np.array_equal(t[name].grad, plain[name].grad), name
    assert np.array_equal(t["w"].grad, plain["w"].grad + 1)


def test_only_backward_hands_leaves_over(ready, blocked):
    """tt.grad is no backward(): it leaves .grad alone and calls no hook."""
    t, seen = leaves(), []
    ready(t["w"], lambda leaf: seen.append(leaf))
    tt.grad(lambda w: loss_of(dict(t, w=w), [], blocked))(t["w"])
    assert seen == [] and t["w"].grad is None
    tt.nn.functional.relu(t["x"] @ t["w"]).sum().backward()
    assert len(seen) == 1
