"""tt.compile records through the engine's own sweeps (the recorder hook): a compiled program
raises the eager engine's messages, honours detect_anomaly and the saved-value checks."""

import numpy as np
import pytest

import tinytensor as tt


def _picky_square():
    @tt.primitive
    def picky_square(x):
        return x * x

    def vjp(g, ans, x):
        if np.any(np.abs(x) > 10):
            raise ValueError("picky_square's VJP refuses inputs above 10")
        return 2 * g * x

    picky_square.defvjp(vjp)
    picky_square.defjvp(lambda t, ans, x: 2 * t * x)
    return picky_square


def test_a_raising_user_vjp_names_its_tape_entry_when_traced_and_when_replayed():
    sq = _picky_square()
    step = tt.compile(tt.grad(lambda x: tt.sum(sq(x))))
    with pytest.raises(ValueError) as eager:
        tt.grad(lambda x: tt.sum(sq(x)))(np.array([20.0]))
    assert "tape entry picky_square" in str(eager.value)
    with pytest.raises(ValueError, match=r"in the VJP rule of tape entry picky_square\(.*refuses"):
        step(np.array([20.0]))                       # raises while tracing
    np.testing.assert_allclose(step(np.array([1.0, 2.0])), [2.0, 4.0])
    with pytest.raises(ValueError, match=r"in the VJP rule of tape entry picky_square\(.*refuses"):
        step(np.array([1.0, 20.0]))                  # raises in the generated program


def test_detect_anomaly_catches_an_infinite_gradient_compiled_as_eagerly():
    f = lambda x: tt.sum(tt.sqrt(x))                 # noqa: E731
    step = tt.compile(tt.value_and_grad(f))
    step(np.array([1.0, 4.0]))                       # traced outside detect_anomaly
    with tt.detect_anomaly():
        with pytest.raises(FloatingPointError, match="gradient .* sqrt"):
            tt.value_and_grad(f)(np.array([0.0, 4.0]))
        with pytest.raises(FloatingPointError, match="gradient .* sqrt"):
            step(np.array([0.0, 4.0]))
        fresh = tt.compile(tt.value_and_grad(f))
        with pytest.raises(FloatingPointError, match="gradient .* sqrt"):
            fresh(np.array([0.0, 4.0]))              # traced inside detect_anomaly
    value, g = step(np.array([0.0, 4.0]))            # outside: inf, as eagerly
    assert np.isinf(g[0]) and value == 2.0


def test_saved_value_check_applies_while_tracing():
    def loss(w, x):
        y = tt.exp(w * x)                             # saves w
        with tt.no_grad():
            w *= 2.0                                  # then changes it in place
        return tt.sum(y)

    f = lambda x: tt.grad(loss)(np.ones(2), x)      # noqa: E731
    with pytest.raises(RuntimeError, match="modified in place") as eager:
        f(np.ones(2))
    with pytest.raises(RuntimeError, match="modified in place") as compiled:
        tt.compile(f)(np.ones(2))
    assert str(compiled.value).split(" (")[0] == str(eager.value).split(" (")[0]


def test_forward_error_in_the_program_names_the_primitive():
    step = tt.compile(lambda x, i: tt.take(x, i) if hasattr(tt, "take") else x[i])
    step(np.arange(3.0), np.array([0, 1]))
    with pytest.raises(IndexError):
        step(np.arange(3.0), np.array([0, 7]))


def test_recording_patches_nothing_process_wide():
    import tinytensor.tape as tape
    from tinytensor.tensor import Tensor
    before = (tt.Primitive.__call__, tape.backward, Tensor.__lt__, Tensor.__float__, Tensor.__iadd__)

    def f(x):       # checked inside (f may change no state of its own: that is refused)
        assert (tt.Primitive.__call__, tape.backward, Tensor.__lt__, Tensor.__float__,
                Tensor.__iadd__) == before
        return tt.sum(x * x)

    tt.compile(f)(np.ones(3))


def test_result_whose_graph_f_changed_in_place_requires_grad_and_its_backward_raises():
    """f updates the weights it used under no_grad after computing the loss: eagerly the loss
    still requires grad and only its backward() raises; compiled, the same (not off the tape)."""
    def build():
        w = tt.tensor(np.array([1.0, 2.0]), requires_grad=True)

        def step(x, lr):
            loss = tt.sum(tt.tanh(w * x))
            with tt.no_grad():
                w.sub_(lr * w)
            return loss
        return w, step

    (we, fe), (wc, fc) = build(), build()
    fc = tt.compile(fc)
    for i in range(4):
        x, lr = np.array([0.5, -1.0]) * (i + 1), 0.1 / (i + 1)
        le, lc = fe(x, lr), fc(x, lr)
        assert le.requires_grad and lc.requires_grad
        assert le.data.tobytes() == lc.data.tobytes() and we.data.tobytes() == wc.data.tobytes()
        with pytest.raises(RuntimeError, match="modified in place"):
            le.backward()
        with pytest.raises(RuntimeError, match="modified in place"):
            lc.backward()


def test_a_result_on_the_tape_returned_twice_is_one_object():
    m = tt.nn.Linear(3, 2, rng=0)
    g = tt.compile(lambda x: (lambda h: (h, h))(m(x)))
    for _ in range(3):
        a, b = g(np.ones((2, 3)))
        assert a is b and a.requires_grad
        m.zero_grad()
        (a.sum() + b.sum()).backward()
        np.testing.assert_array_equal(m.bias.grad, [4.0, 4.0])
