"""The generated program's memory: temporaries freed after their last use, buffers reused only
where nothing else holds them, numbers unchanged (bit for bit against eager)."""

import tracemalloc

import numpy as np

import tinytensor as tt
from tinytensor import allocator


def _peak(fn, *args):
    fn(*args)                                  # warm (and, compiled, trace) first
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = fn(*args)
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def chain(x):
    for _ in range(30):
        x = tt.tanh(x * 0.9 + 0.1)
    return tt.sum(x)


def test_a_long_chain_holds_a_few_arrays_not_all_of_them():
    x = np.random.default_rng(0).standard_normal(2**17)          # 1 MiB
    step = tt.compile(tt.value_and_grad(chain))
    (value, grad), peak = _peak(step, x)
    eager_value, eager_grad = tt.value_and_grad(chain)(x)
    assert value == eager_value and np.array_equal(grad, eager_grad)
    # the gradient needs the 30 saved tanh outputs (30 MiB); the rest is freed as it goes
    assert peak < 36 * x.nbytes, peak / x.nbytes
    assert "del " in step.source and "(in place)" in step.source


def test_gradient_contributions_accumulate_in_place():
    rng = np.random.default_rng(1)
    W, X = rng.standard_normal((64, 32)), rng.standard_normal((16, 64))

    def loss(W, X):
        return tt.sum(tt.tanh(X @ W)) + tt.sum(W * W)     # two contributions to W's gradient

    step = tt.compile(tt.grad(loss))
    assert np.array_equal(step(W, X), tt.grad(loss)(W, X))
    assert "+= " in step.source


def test_a_temporary_that_a_view_still_needs_is_not_overwritten():
    x0 = np.arange(12.0).reshape(3, 4)

    def f(x):
        a = x * 2.0
        view = tt.reshape(a, (4, 3))          # a view of a's memory, used after a's last use
        b = a + 1.0                           # a's last use: a + 1 may not go into a's buffer
        return tt.sum(b) + tt.sum(view * view)

    for step in (tt.compile(f), tt.compile(tt.value_and_grad(f))):
        for x in (x0, x0 + 0.5):               # two calls: nothing stale
            expected = np.sum(x * 2 + 1) + np.sum((x * 2) ** 2)
            value = step(x)
            value = value[0] if isinstance(value, tuple) else value
            assert value == expected


def test_results_and_arguments_are_never_written():
    x = np.linspace(-1, 1, 4096)
    saved = x.copy()

    def f(x):
        y = x * 3.0
        return y, y + 1.0                       # y is a result: not reused for y + 1

    step = tt.compile(f)
    y, y1 = step(x)
    assert np.array_equal(x, saved) and np.array_equal(y, saved * 3) and np.array_equal(y1, saved * 3 + 1)


def test_allocator_tuning_is_reported_and_can_be_switched_off():
    assert allocator.tune({"TINYTENSOR_MALLOC": "0"}) is None
    assert allocator.tune({"MALLOC_MMAP_THRESHOLD_": "65536"}) is None    # the user's own setting wins
    if allocator.TUNED is not None:
        assert dict(allocator.TUNED) == {"M_MMAP_THRESHOLD": allocator.MMAP_THRESHOLD,
                                         "M_TRIM_THRESHOLD": allocator.TRIM_THRESHOLD}


def test_arguments_a_rule_never_reads_are_not_kept_and_a_products_view_is_reused():
    """A matmul's VJP rules never read `ans`: the program passes None there (codegen's
    _unused_parameters), so a stacked product (a C-ordered view of a fresh array nobody else holds)
    dies at its bias add, which then writes into it; the numbers stay eager's, bit for bit."""
    rng = np.random.default_rng(2)
    x, W, b = rng.standard_normal((4, 8, 16)), rng.standard_normal((16, 32)), rng.standard_normal(32)

    def loss(x, W, b):
        return tt.sum(tt.tanh(x @ W + b))

    step = tt.compile(tt.value_and_grad(loss, argnums=(0, 1, 2)))
    got, want = step(x, W, b), tt.value_and_grad(loss, argnums=(0, 1, 2))(x, W, b)
    assert got[0] == want[0] and all(np.array_equal(g, w) for g, w in zip(got[1], want[1]))
    assert "matmul_vjp0(g_b, None, x, W)" in step.source and "matmul_vjp1(g_b, None, x, W)" in step.source
    assert "z1 += b" in step.source, step.source


def test_a_rule_taking_any_arguments_is_passed_all_of_them():
    from tinytensor.compile.codegen import _unused_parameters

    def rule(g, ans, x):
        return g * 2

    def passes_on(g, ans, *rest):
        return g

    def reads_locals(g, ans):
        return locals()["g"]

    assert _unused_parameters(rule) == {1, 2}
    assert _unused_parameters(passes_on) == frozenset() and _unused_parameters(reads_locals) == frozenset()
    assert _unused_parameters(max) == frozenset() and _unused_parameters(lambda g, ans, x: g * x) == {1}


def test_softmax_and_where_write_into_an_argument_read_for_the_last_time():
    """Attention's scores: where(mask, s, -inf), softmax, and their rules write into the array
    they are given when nothing reads it afterwards (codegen._INTO; compile/fusions.py *_into):
    eager's numbers bit for bit, and never into an array still needed."""
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 3, 8, 4)), rng.standard_normal((2, 3, 8, 4))
    mask = np.tril(np.ones((8, 8), dtype=bool))
    u = rng.standard_normal((2, 3, 8, 8))

    def attention(q, k):
        s = tt.where(mask, (q @ tt.swapaxes(k, -1, -2)) * 0.5, -np.inf)
        return tt.sum(tt.softmax(s, axis=-1) * u)

    def scores_kept(q, k):           # the scores are a result too: nothing is written into them
        s = tt.where(mask, (q @ tt.swapaxes(k, -1, -2)) * 0.5, -np.inf)
        return tt.sum(tt.softmax(s, axis=-1) * u), s

    step = tt.compile(tt.value_and_grad(attention, argnums=(0, 1)))
    for x in (q, q + 1):
        (v, (gq, gk)), (v0, (gq0, gk0)) = step(x, k), tt.value_and_grad(attention, argnums=(0, 1))(x, k)
        assert v == v0 and np.array_equal(gq, gq0) and np.array_equal(gk, gk0)
    for form in ("where_into(", "softmax_into(", "softmax_rule_into(", "where_rule_into("):
        assert form in step.source, (form, step.source)
    kept = tt.compile(scores_kept)
    (v, s), (v0, s0) = kept(q, k), scores_kept(q, k)
    assert v == v0 and np.array_equal(s, s0.data) and "softmax_into(" not in kept.source


def test_a_value_that_is_a_copy_only_for_the_traced_layout_is_never_written_into():
    """reshape of a non-contiguous argument copies while recording, but on a contiguous argument
    at replay (same shape, same program) it is a view of the caller's array: the program must not
    write into it in place (found by the fuzzer: the gradient came out wrong and the argument was
    overwritten)."""
    rng = np.random.default_rng(7)
    traced = rng.standard_normal((3, 2)).T[::-1]            # (2, 3), neither C nor F ordered
    u = rng.standard_normal((1, 6))

    def loss(a, b):
        z = tt.reshape(a, (-1,))
        return tt.sum(b / (z * z + 0.5) * u)

    step = tt.compile(tt.grad(loss, argnums=(0, 1)))
    step(traced, rng.standard_normal((1, 6)))
    a, b = np.ascontiguousarray(rng.standard_normal((2, 3))), rng.standard_normal((1, 6))
    saved = a.copy()
    got, want = step(a, b), tt.grad(loss, argnums=(0, 1))(a, b)
    assert np.array_equal(a, saved), "the compiled program wrote into its argument"
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
