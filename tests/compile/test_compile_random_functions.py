"""Every tinytensor random function drawn inside a compiled function goes through draws.draw:
each call draws anew, from the same generator (the global one, tt.manual_seed, or an explicit
Generator, or a seed), in eager order. Compiled equals eager over 3 calls with the same seed."""

import numpy as np
import pytest

import tinytensor as tt

F = tt.nn.functional


def _x(i):
    return (tt.tensor(np.arange(12.0).reshape(3, 4) / 7 + i),)


def _q(i):
    return (tt.tensor(np.random.default_rng(i).standard_normal((2, 3, 4))),)


def _rnn(cls):
    def make(g):
        m = getattr(tt.nn, cls)(4, 5, num_layers=2, dropout=0.4, batch_first=True, rng=g)
        return lambda q: m(q)[0]
    return make


def _module(make_module):
    def make(g):
        m = make_module(g)
        return lambda x: m(x)
    return make


def _mha(g):
    m = tt.nn.MultiheadAttention(4, 2, dropout=0.3, batch_first=True, rng=g)
    return lambda q: m(q, q, q)[0]


CASES = {   # name: (make(rng) -> f, inputs for call i)
    "randn": (lambda g: (lambda x: x + tt.randn(3, 4, rng=g)), _x),
    "rand": (lambda g: (lambda x: x * tt.rand(3, 4, rng=g)), _x),
    "multinomial": (lambda g: (lambda x: tt.multinomial(tt.softmax(x, axis=-1), 2, generator=g)), _x),
    "multinomial_replacement": (
        lambda g: (lambda x: tt.multinomial(tt.softmax(x, axis=-1), 5, replacement=True, generator=g)), _x),
    "Dropout": (_module(lambda g: tt.nn.Dropout(0.5, rng=g)), _x),
    "F.dropout": (lambda g: (lambda x: F.dropout(x, 0.5, True, rng=g)), _x),
    "scaled_dot_product_attention": (
        lambda g: (lambda q: F.scaled_dot_product_attention(q, q, q, dropout_p=0.3, rng=g)), _q),
    "MultiheadAttention": (_mha, _q),
    "RNN": (_rnn("RNN"), _q),
    "LSTM": (_rnn("LSTM"), _q),
    "GRU": (_rnn("GRU"), _q),
}


def _run(make, inputs, rng_kind, compiled):
    tt.manual_seed(0)
    g = {"global": None, "generator": np.random.default_rng(5), "seed": 7}[rng_kind]
    f = make(g)                                   # a layer's init draws here, before the seed
    f = tt.compile(f) if compiled else f
    tt.manual_seed(1)
    if rng_kind == "generator":
        g.bit_generator.state = np.random.default_rng(6).bit_generator.state
    return [np.array(tt.tensor(f(*inputs(i))).data) for i in range(3)]


@pytest.mark.parametrize("rng_kind", ["global", "generator"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_draws_as_eager_over_three_calls(name, rng_kind):
    make, inputs = CASES[name]
    eager = _run(make, inputs, rng_kind, False)
    compiled = _run(make, inputs, rng_kind, True)
    assert any(not np.array_equal(eager[0], e) for e in eager[1:]) or name.startswith("multinomial")
    for e, c in zip(eager, compiled):
        np.testing.assert_array_equal(c, e)


@pytest.mark.parametrize("name", ["randn", "F.dropout", "multinomial", "scaled_dot_product_attention"])
def test_a_seed_gives_the_same_draw_on_every_call_compiled_too(name):
    # rng=7: a fresh stream from the seed on every call (eager); the compiled program must not
    # keep the Generator made at trace time and advance it
    make, inputs = CASES[name]
    eager = _run(make, inputs, "seed", False)
    compiled = _run(make, inputs, "seed", True)
    for e, c in zip(eager, compiled):
        np.testing.assert_array_equal(c, e)


def test_multinomial_checks_its_weights_on_every_compiled_call():
    f = tt.compile(lambda p: tt.multinomial(p, 1))
    f(np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="non-negative"):
        f(np.array([-1.0, 0.5]))
