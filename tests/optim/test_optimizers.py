"""Optimizers: PyTorch's update rules against a NumPy reference, argument checks, dtypes, and
proof that `step()` stays off the tape and that a long training loop keeps memory flat."""

import gc
import tracemalloc

import numpy as np
import pytest

import tinytensor as tt

SHAPES = [(3, 4), (4,)]


def make_params(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [tt.tensor(rng.standard_normal(s), requires_grad=True, dtype=dtype) for s in SHAPES]


def gradient_sequence(steps, seed=1):
    """A different gradient for every parameter at every step (so momentum and the moments
    see varying inputs)."""
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) for s in SHAPES] for _ in range(steps)]


def run(opt_class, params, grads, **options):
    opt = opt_class(params, **options)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.copy()
        opt.step()
    return [p.data for p in params]


# ----- NumPy references, written from the PyTorch documentation ---------------------------------
def sgd_reference(params, grads, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
    params = [p.copy() for p in params]
    bufs = [None] * len(params)
    for step_grads in grads:
        for i, g in enumerate(step_grads):
            g = g + weight_decay * params[i]
            if momentum != 0:
                bufs[i] = g.copy() if bufs[i] is None else momentum * bufs[i] + g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            params[i] = params[i] - lr * g
    return params


def adam_reference(params, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    params = [p.copy() for p in params]
    b1, b2 = betas
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, step_grads in enumerate(grads, start=1):
        for i, g in enumerate(step_grads):
            g = g + weight_decay * params[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g ** 2
            m_hat = m[i] / (1 - b1 ** t)
            v_hat = v[i] / (1 - b2 ** t)
            params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return params


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.05, momentum=0.8, weight_decay=0.1, nesterov=True),
]


@pytest.mark.parametrize("steps", [1, 5])
@pytest.mark.parametrize("options", SGD_CASES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_sgd_matches_reference(options, steps):
    params = make_params()
    start = [p.data.copy() for p in params]
    grads = gradient_sequence(steps)
    got = run(tt.optim.SGD, params, grads, **options)
    want = sgd_reference(start, grads, **options)
    for g, w, s in zip(got, want, start):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-12)
        assert np.abs(g - s).max() > 1e-3        # it did move


ADAM_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.1, betas=(0.8, 0.99), eps=1e-6),
    dict(lr=0.1, betas=(0.5, 0.9), eps=1e-3, weight_decay=0.05),
]


@pytest.mark.parametrize("steps", [1, 7])
@pytest.mark.parametrize("options", ADAM_CASES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_adam_matches_reference(options, steps):
    params = make_params()
    start = [p.data.copy() for p in params]
    grads = gradient_sequence(steps)
    got = run(tt.optim.Adam, params, grads, **options)
    want = adam_reference(start, grads, **options)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-12)


def test_adam_bias_correction_makes_the_first_step_lr_sized():
    """With bias correction the first update is lr * g / (|g| + eps): about lr per entry."""
    (p,) = make_params()[:1]
    start = p.data.copy()
    p.grad = np.full(p.shape, 1e-3)
    tt.optim.Adam([p], lr=0.01).step()
    np.testing.assert_allclose(start - p.data, 0.01 * 1e-3 / (1e-3 + 1e-8), rtol=1e-12)


def test_sgd_through_backward_on_a_model():
    """The real loop (forward, backward, step) equals the reference applied to backward's grads."""
    rng = np.random.default_rng(0)
    model = tt.nn.Sequential(tt.nn.Linear(3, 4, rng=1, dtype=np.float64), tt.nn.Tanh(),
                             tt.nn.Linear(4, 2, rng=2, dtype=np.float64))
    x, y = rng.standard_normal((5, 3)), rng.integers(0, 2, 5)
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    ref_params = [p.data.copy() for p in model.parameters()]
    bufs = [None] * len(ref_params)
    for _ in range(3):
        loss = tt.nn.CrossEntropyLoss()(model(x), y)
        opt.zero_grad()
        loss.backward()
        grads = [p.grad.copy() for p in model.parameters()]
        opt.step()
        for i, g in enumerate(grads):
            g = g + 0.01 * ref_params[i]
            bufs[i] = g if bufs[i] is None else 0.9 * bufs[i] + g
            ref_params[i] = ref_params[i] - 0.1 * bufs[i]
    for p, r in zip(model.parameters(), ref_params):
        np.testing.assert_allclose(p.data, r, rtol=0, atol=1e-12)


# ----- what step() and zero_grad() touch -----------------------------------------------------------
@pytest.mark.parametrize("opt_class", [tt.optim.SGD, tt.optim.Adam])
def test_step_skips_params_without_grad_and_leaves_grads_alone(opt_class):
    a, b = make_params()
    b_before = b.data.copy()
    g = np.ones(a.shape)
    a.grad = g
    opt = opt_class([a, b], lr=0.1, weight_decay=0.1)
    opt.step()
    np.testing.assert_array_equal(b.data, b_before)       # no grad: untouched
    np.testing.assert_array_equal(a.grad, np.ones(a.shape))   # the user's gradient is not modified
    assert a.grad is g


def test_adam_counts_steps_per_parameter():
    """A parameter skipped (grad None) does not advance its own bias-correction step."""
    a, b = make_params()
    opt = tt.optim.Adam([a, b], lr=0.1)
    a.grad = np.ones(a.shape)
    opt.step()
    b.grad, b_start = np.ones(b.shape), b.data.copy()
    opt.step()
    assert [opt.state[a]["step"], opt.state[b]["step"]] == [2, 1]
    np.testing.assert_allclose(b_start - b.data, 0.1 / (1 + 1e-8), rtol=1e-12)   # a first step


@pytest.mark.parametrize("opt_class", [tt.optim.SGD, tt.optim.Adam])
def test_zero_grad_sets_none(opt_class):
    params = make_params()
    for p in params:
        p.grad = np.ones(p.shape)
    opt_class(params, lr=0.1).zero_grad()
    assert all(p.grad is None for p in params)


def test_accepts_a_generator_and_dedupes():
    model = tt.nn.Linear(3, 2)
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    assert [id(p) for p in opt.params] == [id(model.weight), id(model.bias)]
    assert len(tt.optim.Adam([model.weight, model.weight, model.bias]).params) == 2


@pytest.mark.parametrize("opt_class,options", [
    (tt.optim.SGD, dict(lr=np.float64(0.1), momentum=np.float64(0.9), weight_decay=np.float64(1e-2),
                        nesterov=True)),
    (tt.optim.Adam, dict(lr=np.float64(1e-2), betas=(np.float64(0.9), np.float64(0.99)),
                         eps=np.float64(1e-8), weight_decay=np.float64(1e-2))),
])
def test_float32_params_stay_float32(opt_class, options):
    """NumPy 2: float32 array * np.float64 scalar is float64. The optimizer must not promote."""
    params = make_params(np.float32)
    arrays = [p.data for p in params]
    opt = opt_class(params, **options)
    for step_grads in gradient_sequence(3):
        for p, g in zip(params, step_grads):
            p.grad = g.astype(np.float32)
        opt.step()
    for p, a in zip(params, arrays):
        assert p.data is a                  # updated in place ...
        assert p.dtype == np.float32        # ... and still float32
    state = [v for s in opt.state.values() for v in s.values() if isinstance(v, np.ndarray)]
    assert len(state) == (2 if opt_class is tt.optim.SGD else 4)
    assert all(s.dtype == np.float32 for s in state)


@pytest.mark.parametrize("make,message", [
    (lambda p: tt.optim.SGD(p, lr=-0.1), "lr"),
    (lambda p: tt.optim.SGD(p, lr=0.1, momentum=-0.5), "momentum"),
    (lambda p: tt.optim.SGD(p, lr=0.1, weight_decay=-1), "weight_decay"),
    (lambda p: tt.optim.SGD(p, lr=0.1, nesterov=True), "nesterov"),
    (lambda p: tt.optim.SGD(p, lr=float("nan")), "lr"),
    (lambda p: tt.optim.Adam(p, lr=-1e-3), "lr"),
    (lambda p: tt.optim.Adam(p, betas=(1.0, 0.999)), "beta1"),
    (lambda p: tt.optim.Adam(p, betas=(0.9, -0.1)), "beta2"),
    (lambda p: tt.optim.Adam(p, betas=(0.9,)), "betas"),
    (lambda p: tt.optim.Adam(p, eps=-1e-8), "eps"),
    (lambda p: tt.optim.Adam(p, weight_decay=-0.1), "weight_decay"),
    (lambda p: tt.optim.SGD([], lr=0.1), "empty"),
    (lambda p: tt.optim.SGD([tt.tensor([1.0])], lr=0.1), "does not require grad"),
    (lambda p: tt.optim.SGD([p[0] * 2], lr=0.1), "leaves"),
])
def test_bad_arguments_raise_clear_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make(make_params())


@pytest.mark.parametrize("bad", [[np.ones(3)], make_params()[0]])
def test_non_tensor_params_raise_type_error(bad):
    with pytest.raises(TypeError, match="Tensor"):
        tt.optim.SGD(bad, lr=0.1)


def test_lr_must_be_a_number():
    with pytest.raises(TypeError, match="lr"):
        tt.optim.SGD(make_params(), lr="0.1")


# ----- the tape does not grow during step(), and memory stays flat --------------------------------
def _live_tensors():
    return sum(1 for o in gc.get_objects() if type(o) is tt.Tensor)


@pytest.mark.parametrize("opt_class,options", [
    (tt.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-2, nesterov=True)),
    (tt.optim.Adam, dict(lr=0.01, weight_decay=1e-2)),
    (tt.optim.AdamW, dict(lr=0.01, amsgrad=True)),
    (tt.optim.RMSprop, dict(lr=0.01, momentum=0.9, centered=True, weight_decay=1e-2)),
])
def test_step_records_nothing_and_creates_no_tensor(opt_class, options):
    model = tt.nn.Sequential(tt.nn.Linear(4, 8, rng=0), tt.nn.ReLU(), tt.nn.Linear(8, 3, rng=1))
    x, y = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32), np.arange(6) % 3
    opt = opt_class(model.parameters(), **options)
    loss = tt.nn.CrossEntropyLoss()(model(x), y)
    loss.backward()
    before_step = [p.data.copy() for p in model.parameters()]
    tape_before = tt.wengert_list(loss)

    gc.collect()
    live_before = _live_tensors()
    id_before = tt.tensor(0.0)._id      # the creation counter: every Tensor takes the next id
    opt.step()
    opt.step()
    id_after = tt.tensor(0.0)._id
    gc.collect()
    assert _live_tensors() == live_before
    # Nothing in between made a Tensor, even a short-lived one: the only other draws from the
    # creation counter are mark_modified's stamps, one per parameter write.
    assert id_after == id_before + 1 + 2 * len(list(model.parameters()))

    for p, old in zip(model.parameters(), before_step):
        assert p._prim is None and p._inputs is None     # still leaves
        assert p.requires_grad and type(p.data) is np.ndarray
        assert not np.array_equal(p.data, old)           # and they did move
    assert tt.wengert_list(loss) == tape_before          # the loss's graph gained nothing


def test_memory_stays_flat_over_2000_sgd_steps(record_property):
    """With the garbage collector off, only reference counting frees the tape: a cycle anywhere
    in a step (engine, layer, loss or optimizer) would show up here as steady growth."""
    rng = np.random.default_rng(0)
    model = tt.nn.Sequential(tt.nn.Linear(16, 32, rng=1), tt.nn.ReLU(), tt.nn.Linear(32, 4, rng=2))
    X = rng.standard_normal((64, 16)).astype(np.float32)
    y = rng.integers(0, 4, 64)
    loss_fn = tt.nn.CrossEntropyLoss()
    opt = tt.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    batches = [(X[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]

    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        traced = {}
        for step in range(1, 2001):
            xb, yb = batches[step % 4]
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step in (200, 2000):
                traced[step] = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        gc.enable()
    growth = traced[2000] - traced[200]
    record_property("traced_bytes", traced)
    print(f"traced bytes at step 200: {traced[200]}, at step 2000: {traced[2000]}, growth {growth}")
    # One leaked Tensor per step would be ~1800 * 100 bytes; one leaked batch-sized array per
    # step ~1800 * 500 bytes. Allow a few KiB of noise (interned ints, allocator bookkeeping).
    assert growth < 4096, traced
    assert np.isfinite(loss.item())
