"""Issue 7, graph battery: depth, reuse and aliasing, accumulation, no_grad, freeing, memory.

Documented behaviour tested here:
* no limit on depth: a chain of 1,000,000 tape entries goes through both sweeps and is freed;
* a tensor used several times gets the sum of its uses (also on both sides of one op);
* `.grad` accumulates (+=) over backward calls, also when the same graph is swept twice: the
  tape is kept (no retain_graph needed, unlike PyTorch), so a second backward re-runs the sweep
  and adds the same gradient again;
* only leaves get `.grad`; intermediates and the output keep `.grad is None`;
* `no_grad` records nothing, and a graph is freed by reference counting alone (no cycles).
"""

import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import tinytensor as tt

RNG = np.random.default_rng(7)


@pytest.fixture
def gc_disabled():
    """Without the cyclic collector, only reference counting frees objects: anything that
    survives a `del` is kept alive by a reference (or a cycle), never by collector timing."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# ----- depth --------------------------------------------------------------------------------------
DEPTH = 1_000_000


@pytest.mark.slow
def test_depth_one_million_in_both_modes(gc_disabled):
    c = 1.0000001
    x = tt.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(DEPTH):
        y = y * c
    # value, gradient and tangent are the same product c * c * ... * c, in the same order
    np.testing.assert_allclose(y.data, c ** DEPTH, rtol=1e-9)
    y.backward()
    assert x.grad == y.data
    assert y.jvp({x: np.array(1.0)}) == y.data
    probe = weakref.ref(y)
    del y                                  # a million nested entries freed with no recursion error
    assert probe() is None


def test_deep_graph_of_mixed_ops_in_both_modes():
    """100,000 entries of several ops (a recursive engine fails at ~1,000)."""
    x = tt.tensor([0.5, -0.25], requires_grad=True)
    y = x
    for _ in range(25_000):
        y = tt.tanh(y) * 0.5 + x * 0.25 - 0.125
    reference = x.data.copy()
    d = np.ones(2)
    for _ in range(25_000):               # the same recurrence and its derivative, by hand
        t = np.tanh(reference)
        d = (1 - t * t) * 0.5 * d + 0.25
        reference = t * 0.5 + x.data * 0.25 - 0.125
    np.testing.assert_allclose(y.data, reference, rtol=1e-13)
    y.backward(np.ones(2))
    np.testing.assert_allclose(x.grad, d, rtol=1e-12)
    np.testing.assert_allclose(y.jvp({x: np.ones(2)}), d, rtol=1e-12)


# ----- reuse and aliasing -------------------------------------------------------------------------
def test_a_tensor_used_twice_gets_both_contributions():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = tt.tensor([3.0, -1.0], requires_grad=True)
    d = (x + y) + x
    d.backward(np.array([1.0, 10.0]))
    np.testing.assert_array_equal(x.grad, [2, 20])
    np.testing.assert_array_equal(y.grad, [1, 10])
    np.testing.assert_array_equal(d.jvp({x: np.ones(2), y: np.full(2, 5.0)}), [7, 7])
    z = x * x
    z.backward(np.ones(2))
    np.testing.assert_array_equal(x.grad, [2, 20] + 2 * x.data)
    np.testing.assert_array_equal(z.jvp({x: np.ones(2)}), 2 * x.data)


X = RNG.uniform(0.5, 1.5, (3, 3))
SELF_OPS = {   # op(x, x), and its exact VJP for the cotangent g
    "add": (tt.add, lambda x, g: 2 * g),
    "sub": (tt.sub, lambda x, g: 0 * g),
    "mul": (tt.mul, lambda x, g: 2 * x * g),
    "div": (tt.div, lambda x, g: 0 * g),
    "power": (tt.power, lambda x, g: g * x ** x * (np.log(x) + 1)),
    "maximum": (tt.maximum, lambda x, g: g),          # two halves of a tie
    "minimum": (tt.minimum, lambda x, g: g),
    "matmul": (tt.matmul, lambda x, g: g @ x.T + x.T @ g),
    "dot": (tt.dot, lambda x, g: g @ x.T + x.T @ g),
    "dot-1d": (tt.dot, lambda x, g: 2 * g * x),
}


@pytest.mark.parametrize("name", SELF_OPS)
def test_the_same_tensor_on_both_sides_of_a_binary_op(name):
    op, expected_vjp = SELF_OPS[name]
    value = X[0] if name == "dot-1d" else X
    x = tt.tensor(value, requires_grad=True)
    out = op(x, x)
    g = RNG.standard_normal(out.shape)
    out.backward(g)
    np.testing.assert_allclose(x.grad, expected_vjp(value, g), rtol=1e-13, atol=1e-15)
    # forward mode: <g, J v> = <J^T g, v>
    v = RNG.standard_normal(value.shape)
    np.testing.assert_allclose(np.sum(g * out.jvp({x: v})), np.sum(x.grad * v), rtol=1e-12)
    assert tt.gradcheck(lambda a: op(a, a), value, rtol=1e-6, atol=1e-9)


# ----- accumulation ------------------------------------------------------------------------------
def test_backward_on_fresh_graphs_accumulates():
    x = tt.tensor([1.0, -2.0], requires_grad=True)
    tt.sum(x * x).backward()
    first = x.grad.copy()
    tt.sum(3.0 * x).backward()
    np.testing.assert_array_equal(first, 2 * x.data)
    np.testing.assert_array_equal(x.grad, 2 * x.data + 3)
    x.zero_grad()
    assert x.grad is None


def test_backward_twice_on_the_same_graph_accumulates_twice():
    """The engine keeps the tape after backward: a second call re-runs the sweep and adds again
    (PyTorch raises unless retain_graph=True; here the tape is freed only with the output)."""
    x = tt.tensor([1.0, -2.0], requires_grad=True)
    h = tt.exp(x)
    loss = tt.sum(h * h)
    loss.backward()
    once = x.grad.copy()
    loss.backward()
    np.testing.assert_allclose(once, 2 * np.exp(2 * x.data), rtol=1e-15)
    np.testing.assert_array_equal(x.grad, 2 * once)
    assert h.grad is None and loss.grad is None


def test_gradients_never_leak_into_non_leaves():
    x = tt.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    const = tt.tensor(RNG.standard_normal((3,)))       # a leaf without requires_grad
    h1 = x * const
    h2 = tt.tanh(h1)
    out = tt.sum(tt.softmax(h2) * h2)
    out.backward()
    out.jvp({x: np.ones(x.shape)})
    assert x.grad is not None and x.grad.shape == x.shape
    assert const.grad is None
    assert all(t.grad is None for t in (h1, h2, out))


def test_leaf_gradients_are_arrays_the_leaf_owns():
    """Two leaves that receive the same cotangent, and the caller's seed, are never aliased."""
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    b = tt.tensor([3.0, 4.0], requires_grad=True)
    seed = np.array([1.0, 1.0])
    (a + b).backward(seed)
    assert not np.shares_memory(a.grad, b.grad)
    assert not np.shares_memory(a.grad, seed) and not np.shares_memory(b.grad, seed)
    (a + b).backward(seed)                  # accumulating must not write into the other leaf or the seed
    np.testing.assert_array_equal(a.grad, [2, 2])
    np.testing.assert_array_equal(b.grad, [2, 2])
    np.testing.assert_array_equal(seed, [1, 1])


def test_accumulation_never_writes_into_an_array_a_rule_returned(registry):
    jacobian_t = np.array([1.0, 1.0])           # a constant the rule returns as it is

    @tt.primitive
    def total_of(x):
        return np.sum(x)
    total_of.defvjp(lambda g, ans, x: jacobian_t if g == 1 else g * jacobian_t)
    total_of.defjvp(lambda t, ans, x: np.sum(t))
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    total_of(x).backward()
    total_of(x).backward()
    np.testing.assert_array_equal(x.grad, [2, 2])
    np.testing.assert_array_equal(jacobian_t, [1, 1])


# ----- no_grad ------------------------------------------------------------------------------------
def test_no_grad_records_nothing(gc_disabled):
    x = tt.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    w = tt.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    with tt.no_grad():
        h = tt.tanh(x @ w)
        p = tt.softmax(h)              # softmax keeps its logits (h, not x): a finite loss
        loss = tt.cross_entropy(p, np.array([0, 1]))
    for t in (h, p, loss):
        assert not t.requires_grad
        assert t._prim is None and t._values is None
        assert t._inputs is None or (t is p and t._inputs[0] is h)
    with pytest.raises(RuntimeError, match="does not require grad"):
        loss.backward()
    np.testing.assert_array_equal(loss.jvp({x: np.ones(x.shape)}), 0.0)
    probe = weakref.ref(x)
    del x                                # nothing computed under no_grad refers to its inputs
    assert probe() is None
    # recording resumes after the block, also when the block raised
    with pytest.raises(ValueError), tt.no_grad():
        raise ValueError("inside no_grad")
    assert (w * 2).requires_grad


# ----- freeing ------------------------------------------------------------------------------------
def test_the_graph_is_freed_with_its_output(gc_disabled):
    x = tt.tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    w = tt.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    hidden = tt.tanh(x @ w)
    out = tt.softmax_cross_entropy(hidden, np.array([0, 1, 1, 0]))
    probes = [weakref.ref(hidden), weakref.ref(out)]
    del hidden
    assert probes[0]() is not None        # still on the tape: the output needs it
    out.backward()
    out.jvp({w: np.ones(w.shape)})
    del out
    assert [p() for p in probes] == [None, None]
    assert x.grad is not None and w.grad is not None      # the leaves keep their gradients


def test_the_graph_is_freed_after_anomaly_mode_and_user_primitives(gc_disabled, registry):
    @tt.primitive
    def twice(x):
        return 2 * x
    twice.defvjp(lambda g, ans, x: 2 * g)
    twice.defjvp(lambda t, ans, x: 2 * t)
    x = tt.tensor([1.0], requires_grad=True)
    with tt.detect_anomaly():
        hidden = twice(tt.sin(x))
        out = tt.sum(hidden * hidden)
        out.backward()
    probes = [weakref.ref(hidden), weakref.ref(out)]
    del hidden, out
    assert [p() for p in probes] == [None, None]


# ----- memory over training -------------------------------------------------------------------------
def _mlp_step(params, x, y, lr):
    w1, b1, w2, b2 = params
    hidden = tt.tanh(x @ w1 + b1)
    loss = tt.softmax_cross_entropy(hidden @ w2 + b2, y)
    loss.backward()
    for p in params:
        p.data -= lr * p.grad
        p.grad = None
    return loss.item()


def train_mlp_memory(steps=10_000, checkpoint=100):
    """Train a 4-16-3 MLP with SGD under tracemalloc with the collector off.

    Returns (bytes traced at `checkpoint`, bytes traced after `steps`, peak, first loss, last
    loss, objects the collector finds afterwards)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 4))
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5).astype(int)
    params = [tt.tensor(rng.standard_normal((4, 16)) * 0.5, requires_grad=True),
              tt.tensor(np.zeros(16), requires_grad=True),
              tt.tensor(rng.standard_normal((16, 3)) * 0.5, requires_grad=True),
              tt.tensor(np.zeros(3), requires_grad=True)]
    xb = tt.tensor(x)
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        for step in range(1, steps + 1):
            loss = _mlp_step(params, xb, y, lr=0.1)
            if step == checkpoint:
                at_checkpoint, first_loss = tracemalloc.get_traced_memory()[0], loss
        at_end, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        gc.enable()
    return at_checkpoint, at_end, peak, first_loss, loss, gc.collect()


@pytest.mark.slow
def test_training_memory_does_not_grow():
    at_100, at_10000, peak, loss_100, loss_10000, garbage = train_mlp_memory()
    assert at_10000 - at_100 < 4096, f"grew by {at_10000 - at_100} bytes between steps 100 and 10,000"
    assert garbage == 0, "the training loop created reference cycles"
    assert loss_10000 < 0.5 * loss_100      # it did train
