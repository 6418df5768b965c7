"""Grad mode, anomaly mode, transform nesting and tt.compile's recorder belong to the thread
that set them (tinytensor.state.STATE is a threading.local), as PyTorch's grad mode."""

import sys
import threading

import numpy as np

import tinytensor as tt


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(32, 5)), rng.normal(size=(32,))


def _train(steps, X, y):
    w = tt.tensor(np.zeros(5), requires_grad=True)
    b = tt.tensor(0.0, requires_grad=True)
    for _ in range(steps):
        loss = tt.mean((tt.tanh(X @ w + b) - y) ** 2)
        loss.backward()
        with tt.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
        w.grad = b.grad = None
        g = tt.grad(lambda v: tt.sum(tt.sin(v) * X[0]))(w.data)   # a transform, too
        assert np.all(np.isfinite(g))
    return w.data.copy(), b.data.copy()


def test_trainer_evaluator_and_compile_in_three_threads_match_one_thread_bit_for_bit():
    X, y = _data()
    want = _train(60, X, y)
    results, errors, stop = {}, [], threading.Event()

    def trainer():
        try:
            results["train"] = _train(60, X, y)
        except Exception as err:      # noqa: BLE001
            errors.append(err)

    def evaluator():
        w = tt.tensor(np.ones(5), requires_grad=True)
        try:
            while not stop.is_set():
                with tt.no_grad():
                    out = tt.tanh(X @ w)
                    assert not out.requires_grad
                with tt.detect_anomaly():
                    tt.sum(X @ w)
        except Exception as err:      # noqa: BLE001
            errors.append(err)

    def compiler():
        try:
            k = 0
            while not stop.is_set():
                k += 1
                step = tt.compile(tt.value_and_grad(lambda v, s: tt.sum(tt.exp(v * s))))
                value, g = step(np.ones(3), float(k % 3))
                np.testing.assert_allclose(g, np.exp(k % 3) * (k % 3))
        except Exception as err:      # noqa: BLE001
            errors.append(err)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)      # switch threads often, so the three overlap
    try:
        threads = [threading.Thread(target=t) for t in (evaluator, compiler)]
        for t in threads:
            t.start()
        trainer()
        stop.set()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    np.testing.assert_array_equal(results["train"][0], want[0])
    np.testing.assert_array_equal(results["train"][1], want[1])


def test_no_grad_in_another_thread_does_not_leak():
    seen = {}
    entered, release = threading.Event(), threading.Event()

    def other():
        with tt.no_grad():
            entered.set()
            release.wait(5)
            seen["other"] = tt.is_grad_enabled()

    t = threading.Thread(target=other)
    t.start()
    entered.wait(5)
    assert tt.is_grad_enabled()
    np.testing.assert_allclose(tt.grad(lambda x: tt.sum(x * x))(np.array([1.0, 2.0])), [2.0, 4.0])
    release.set()
    t.join()
    assert seen["other"] is False and tt.is_grad_enabled()
